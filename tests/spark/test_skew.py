"""Skew audit: figures equal a plain-Python computation on the same producer-written log."""

from __future__ import annotations

import json
import math
import os
from collections import Counter

import pytest
from pyspark.testing import assertDataFrameEqual

from kafkasim.broker import Broker
from kafkasim.broker.cluster import Cluster
from kafkasim.clock import MockClock
from kafkasim.producer import Producer
from kafkasim.spark_jobs import skew
from kafkasim.spark_jobs.common import EXIT_OK, EXIT_VIOLATIONS, gini

pytestmark = pytest.mark.spark


def _write_skewed(d: str) -> None:
    """One hot key, a few warm ones, many cold ones; 3 minutes of traffic on 5 partitions."""
    clock = MockClock(1_700_000_000_000)
    with Broker(d, clock=clock) as b:
        b.create_topic("clicks", partitions=5)
        with Producer(b, clock=clock, linger_ms=0, stamp_headers=True, client_id="web") as p:
            for minute in range(3):
                for i in range(40):
                    p.send("clicks", key=b"hot", value=b"x" * 10)
                    p.send("clicks", key=b"warm-%d" % (i % 3), value=b"y" * 5)
                    if minute == 1:
                        p.send("clicks", key=b"cold-%d" % i, value=None)
                    clock.advance(1_000)
                p.flush()
                clock.advance(20_000)


def _plain_python(d: str) -> dict:
    """The same figures from records fetched through the broker, computed without Spark."""
    per_part: dict[int, list] = {}
    with Broker(d) as b:
        n = b.partition_count("clicks")
        for p in range(n):
            recs, off = [], 0
            while True:
                got = b.fetch("clicks", p, off).records
                if not got:
                    break
                recs += got
                off = got[-1].offset + 1
            per_part[p] = recs
    size = lambda r: (len(r.key or b"") + len(r.value or b"")  # noqa: E731
                      + sum(len(k.encode()) + len(v or b"") for k, v in r.headers))
    counts = [len(per_part[p]) for p in range(n)]
    total = sum(counts)
    mean = total / n
    std = math.sqrt(sum((c - mean) ** 2 for c in counts) / n)
    # Gini as mean absolute difference / (2 * mean): independent of the sorted formula
    g = sum(abs(a - b_) for a in counts for b_ in counts) / (2 * n * n * mean)
    keys = Counter(r.key for recs in per_part.values() for r in recs if r.key is not None)
    windows: dict[int, Counter] = {}
    for p, recs in per_part.items():
        for r in recs:
            windows.setdefault(r.timestamp // 60_000 * 60_000, Counter())[p] += 1
    win = {w: max(c.values()) / (sum(c.values()) / n) for w, c in windows.items()}
    return {"counts": counts, "bytes": [sum(size(r) for r in per_part[p]) for p in range(n)],
            "total": total, "max_over_avg": max(counts) / mean, "cv": std / mean, "gini": g,
            "drift_pct": (max(counts) - mean) / mean * 100,
            "max_over_min": max(counts) / min(counts) if min(counts) else None,
            "hot": keys.most_common(3), "windows": win}


def test_skew_figures_equal_a_plain_python_computation(spark, tmp_path):
    d = str(tmp_path / "data")
    _write_skewed(d)
    exp = _plain_python(d)
    out, png = tmp_path / "skew.json", tmp_path / "skew.png"
    rc = skew.main(["--data-dir", d, "--topic", "clicks", "--json", str(out), "--plot", str(png),
                    "--top-k", "3"], spark=spark)
    rep = json.loads(out.read_text())
    assert rep["records"] == exp["total"]
    assert [p["records"] for p in rep["partitions"]] == exp["counts"]
    assert [p["bytes"] for p in rep["partitions"]] == exp["bytes"]
    assert [p["partition"] for p in rep["partitions"]] == list(range(5))
    for name in ("max_over_avg", "cv", "gini", "drift_pct"):
        assert rep[name] == pytest.approx(exp[name]), name
    assert rep["max_over_min"] == (pytest.approx(exp["max_over_min"]) if exp["max_over_min"] else None)
    assert [(h["key"], h["records"]) for h in rep["hot_keys"]] == [(k.decode(), c) for k, c in exp["hot"]]
    assert rep["hot_keys"][0]["share"] == pytest.approx(exp["hot"][0][1] / exp["total"])
    assert {w["window_start"]: w["max_over_avg"] for w in rep["windows"]["rows"]} == pytest.approx(exp["windows"])
    assert rep["brokers"]["note"].startswith("a single broker's data dir")
    assert not [c for c in rep["checks"] if c["name"].startswith("broker ")]
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert rc == EXIT_VIOLATIONS   # one hot key on 5 partitions is well above max/avg 1.3


def test_an_even_log_passes(spark, tmp_path):
    d = str(tmp_path / "data")
    clock = MockClock(1_700_000_000_000)
    with Broker(d, clock=clock) as b:
        b.create_topic("even", partitions=2)
        with Producer(b, clock=clock, linger_ms=0) as p:
            for i in range(20):
                p.send("even", value=b"v", partition=i % 2)
            p.flush()
    out = tmp_path / "s.json"
    assert skew.main(["--data-dir", d, "--topic", "even", "--json", str(out)], spark=spark) == EXIT_OK
    rep = json.loads(out.read_text())
    assert rep["max_over_avg"] == 1.0 and rep["gini"] == 0.0 and rep["windows"]["alerts"] == 0


def test_window_skew_transform_flags_windows_above_the_threshold(spark):
    # 4 partitions; window 0: 6 records all on partition 0 (max/avg 4); window 60000: even
    rows = [("t", 0, i, 1_000 + i) for i in range(6)] + [("t", p, 10 + p, 61_000) for p in range(4)]
    df = spark.createDataFrame(rows, "topic string, partition int, offset long, timestamp long")
    got = skew.window_skew(df, {"t": 4}, window_ms=60_000, threshold=3.0)
    expected = spark.createDataFrame([("t", 0, 6, 6, 4.0, True), ("t", 60_000, 4, 1, 1.0, False)],
                                     "topic string, window_start long, records long, "
                                     "max_partition_records long, max_over_avg double, alert boolean")
    assertDataFrameEqual(got, expected)


def test_skew_summary_transform(spark):
    stats = spark.createDataFrame([("t", 0, 0), ("t", 1, 0), ("t", 2, 0), ("t", 3, 4), ("u", 0, 2), ("u", 1, 2)],
                                  "topic string, partition int, records long")
    got = skew.skew_summary(stats).select("topic", "partitions", "total", "max_over_avg", "max_over_min", "gini")
    expected = spark.createDataFrame([("t", 4, 4, 4.0, None, 0.75), ("u", 2, 4, 1.0, 1.0, 0.0)],
                                     "topic string, partitions long, total long, max_over_avg double, "
                                     "max_over_min double, gini double")
    assertDataFrameEqual(got, expected)
    assert gini([0, 0, 0, 4]) == 0.75 and gini([3, 3]) == 0.0


START = 1_700_000_000_000


def _cluster_log(d: str, add_idle_broker: bool) -> int:
    """3 brokers, 6 partitions of RF 2, 30 records each (an even placement: 4 replicas and
    2 leaders per broker); optionally a 4th broker added without a reassignment."""
    with Cluster(d, [(0, "r1"), (1, "r2"), (2, "r3")], clock=MockClock(START), seed=7) as c:
        c.create_topic("t", partitions=6, replication_factor=2)
        for p in range(6):
            for i in range(30):
                c.append_records("t", p, [(START + i, b"k%d" % i, b"v" * 10, [])])
        if add_idle_broker:
            c.add_broker(3, "r1")
    return 6 * 30


def _bytes_per_broker(d: str) -> dict[int, int]:
    out = {}
    for name in os.listdir(d):
        if name.startswith("broker-"):
            out[int(name[7:])] = sum(os.path.getsize(os.path.join(d, name, p, f))
                                     for p in os.listdir(os.path.join(d, name))
                                     for f in os.listdir(os.path.join(d, name, p)) if f.endswith(".log"))
    return out


def test_broker_skew_of_an_even_cluster_is_not_flagged(tmp_path):
    d = str(tmp_path / "data")
    _cluster_log(d, add_idle_broker=False)
    r = skew.broker_skew(d, ["t"])
    assert [(b["broker"], b["replicas"], b["leaders"]) for b in r["brokers"]] == [(0, 4, 2), (1, 4, 2), (2, 4, 2)]
    assert {b["broker"]: b["bytes"] for b in r["brokers"]} == _bytes_per_broker(d)
    assert r["ratios"] == {"replicas": 1.0, "leaders": 1.0, "bytes": 1.0} and not any(r["flagged"].values())
    assert skew.broker_skew(d, ["other"])["brokers"][0]["replicas"] == 0     # only the audited topics count
    assert skew.broker_skew(str(tmp_path / "none"), ["t"]) is None           # not a cluster: no figures


def test_the_skew_audit_flags_an_idle_broker_added_without_reassignment(spark, tmp_path, capsys):
    d = str(tmp_path / "data")
    sent = _cluster_log(d, add_idle_broker=True)
    out = tmp_path / "skew.json"
    rc = skew.main(["--data-dir", d, "--json", str(out)], spark=spark)
    rep = json.loads(out.read_text())
    assert rep["records"] == sent and rep["max_over_avg"] == pytest.approx(1.0)   # each partition read once
    b = rep["brokers"]
    assert [(x["broker"], x["replicas"], x["leaders"], x["bytes"]) for x in b["brokers"]] == \
        [(i, 4, 2, _bytes_per_broker(d)[i]) for i in range(3)] + [(3, 0, 0, 0)]
    assert b["idle"] == [3] and b["ratios"] == {"replicas": "inf", "leaders": "inf", "bytes": "inf"}
    failed = {c["name"]: c["value"] for c in rep["checks"] if not c["passed"]}
    assert failed == {"broker replicas max/min": "inf", "broker leaders max/min": "inf",
                      "broker bytes max/min": "inf"}
    assert rc == EXIT_VIOLATIONS and rep["verdict"] == "failed"
    text = capsys.readouterr().out
    assert "idle: 3" in text and "FAILED broker replicas max/min inf > limit 1.3" in text
