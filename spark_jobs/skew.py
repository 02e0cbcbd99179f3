"""Skew audit: how evenly do records and bytes spread over partitions, keys and time?

Run it::

    spark-submit --py-files dist/kafkasim-jobs.zip spark_jobs/skew.py --data-dir DIR --topic T [--json OUT] [--plot OUT.png]

or ``kafkasim audit skew --data-dir DIR --topic T``. Exit code 0 when balanced, 3 when a
threshold is passed (``--max-over-avg``, default 1.3 overall; any time window above
``--window-threshold``, default 5). Each limit is a check in ``checks`` (name, limit,
measured value, passed); below ``--min-records-per-partition`` (default 20) records per
partition on average the verdict is ``not enough data`` and the exit code 0.

Definitions (x = records per partition, over every partition in the topic metadata,
empty ones included as 0; ``bytes`` = key + value + header keys and values, UTF-8/raw
byte lengths, i.e. payload bytes, not batch overhead):

- ``share`` = x / Σx; ``max_over_avg`` = max(x) / mean(x); ``max_over_min`` = max / min
  (null when some partition is empty); ``drift_pct`` = (max − mean) / mean × 100;
  ``cv`` = population standard deviation / mean; ``gini`` = Σ_i (2i − n − 1)·x_(i) / (n·Σx)
  over ascending x (0 even, (n−1)/n all in one partition).
- hot keys: the top K keys by records, with their share of all records and the
  partition(s) they sit in.
- windows: per ``window_ms`` (default 60 000) tumbling window of record timestamps,
  max/avg of the per-partition record counts (avg over all partitions), ``alert`` when
  above the threshold (default 5).
- brokers (a cluster's data dir, ``meta/cluster.json``): replicas, leaders and segment
  bytes per broker (:func:`broker_skew`, through :mod:`kafkasim.placement.skew`), max/min
  over every broker, a check each, failed above 1.3 (``SKEW_THRESHOLD``): a placement fact,
  so the sample floor does not hide it. A single broker's data dir gets ``brokers.note``.

Invariants: pure transforms; the top-level figures are over every (topic, partition)
audited — audit one topic at a time for meaningful figures; per-topic ones are under
``topics``. Thread-safety: no shared state.
"""

from __future__ import annotations

import math
import sys
from typing import Optional, Sequence

from pyspark import StorageLevel
from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

from kafkasim.placement.skew import SKEW_THRESHOLD, max_min_ratio
from kafkasim.spark_jobs import common, options
from kafkasim.spark_jobs.collect import collect_together
from kafkasim.spark_jobs.logdir import LogDir
from kafkasim.types import TopicPartition

__all__ = ["COLUMNS", "record_bytes", "partition_stats", "skew_summary", "hot_keys", "window_skew",
           "broker_skew", "broker_checks", "report", "main"]

BROKER_NOTE = ("a single broker's data dir (no meta/cluster.json): per-broker skew needs a "
               "cluster (kafkasim cluster create); skipped")


COLUMNS = ("topic", "partition", "timestamp", "key", "value", "headers")
"""The record columns the skew figures are defined on (:func:`partition_stats`,
:func:`hot_keys` and :func:`window_skew` over records; the audit itself reads the one scan,
``scan.Scan``)."""


def record_bytes():
    """Column: payload bytes of a record (key + value + header keys and values)."""
    return (F.coalesce(F.octet_length("key"), F.lit(0)) + F.coalesce(F.octet_length("value"), F.lit(0))
            + F.aggregate("headers", F.lit(0), lambda acc, h: acc + F.coalesce(F.octet_length(h["key"]), F.lit(0))
                          + F.coalesce(F.octet_length(h["value"]), F.lit(0)))).cast("long")


def _counted(df: DataFrame) -> list:
    """Aggregates ``records`` and ``bytes`` of ``df``: records themselves, or the weighted
    group rows of a scan (``scan.Scan.keys``: a ``records`` and a ``bytes`` column)."""
    if "records" in df.columns:
        return [F.sum("records").alias("records"), F.sum("bytes").alias("bytes")]
    return [F.count(F.lit(1)).alias("records"), F.sum(record_bytes()).alias("bytes")]


def partition_stats(df: DataFrame, partition_counts: dict[str, int]) -> DataFrame:
    """``(topic, partition, records, bytes, share, byte_share)``, one row per partition of the
    topics in ``df`` (records, or a scan's key rows), partitions in ``partition_counts``
    without records included as 0."""
    spark = df.sparkSession
    counted = df.groupBy("topic", "partition").agg(*_counted(df))
    topics = counted.select("topic").distinct()
    every = spark.createDataFrame([(t, p) for t, n in sorted(partition_counts.items()) for p in range(n)]
                                  or [("", -1)], "topic string, partition int")
    every = every.join(topics, "topic").unionByName(counted.select("topic", "partition")).distinct()
    stats = (every.join(counted, ["topic", "partition"], "left")
             .select("topic", "partition", F.coalesce("records", F.lit(0)).cast("long").alias("records"),
                     F.coalesce("bytes", F.lit(0)).cast("long").alias("bytes")))
    w = Window.partitionBy("topic")
    return (stats.withColumn("share", F.col("records") / F.sum("records").over(w))
            .withColumn("byte_share", F.col("bytes") / F.sum("bytes").over(w)))


def skew_summary(stats: DataFrame, by: Sequence[str] = ("topic",), value: str = "records") -> DataFrame:
    """Across-partition figures of ``value`` per ``by`` group (``by=()``: over all rows):
    ``partitions, total, max_over_avg, max_over_min, drift_pct, cv, gini``."""
    by = list(by)
    w = (Window.partitionBy(*by) if by else Window.partitionBy(F.lit(0))).orderBy(value, *by, "partition")
    ranked = stats.withColumn("_i", F.row_number().over(w))
    x = F.col(value).cast("double")
    agg = ranked.groupBy(*by).agg(
        F.count(F.lit(1)).alias("partitions"), F.sum(x).alias("total"), F.max(x).alias("_max"),
        F.min(x).alias("_min"), F.avg(x).alias("_avg"), F.stddev_pop(x).alias("_std"),
        F.sum((2 * F.col("_i") - 1) * x).alias("_wsum"))
    n = F.col("partitions")
    return agg.select(
        *by, "partitions", F.col("total").cast("long").alias("total"),
        F.when(F.col("_avg") > 0, F.col("_max") / F.col("_avg")).alias("max_over_avg"),
        F.when(F.col("_min") > 0, F.col("_max") / F.col("_min")).alias("max_over_min"),
        F.when(F.col("_avg") > 0, (F.col("_max") - F.col("_avg")) / F.col("_avg") * 100).alias("drift_pct"),
        F.when(F.col("_avg") > 0, F.col("_std") / F.col("_avg")).alias("cv"),
        F.when(F.col("total") > 0, (F.col("_wsum") - n * F.col("total")) / (n * F.col("total")))
         .otherwise(F.lit(0.0)).alias("gini"))


def hot_keys(df: DataFrame, k: int = 10) -> DataFrame:
    """The top ``k`` keys by records (``df``: records, or a scan's key rows):
    ``(topic, key, records, bytes, share, partitions)``;
    ``share`` is of all records of the key's topic; ties broken by key."""
    total = df.groupBy("topic").agg(_counted(df)[0].alias("_total"))
    keys = (df.where(F.col("key").isNotNull()).groupBy("topic", "key")
            .agg(*_counted(df), F.array_sort(F.collect_set("partition")).alias("partitions")))
    return (keys.join(total, "topic").withColumn("share", F.col("records") / F.col("_total"))
            .orderBy(F.desc("records"), "topic", "key").limit(k)
            .select("topic", "key", "records", "bytes", "share", "partitions"))


def window_skew(df: DataFrame, partition_counts: dict[str, int], window_ms: int = 60_000,
                threshold: float = 5.0) -> DataFrame:
    """Per topic and tumbling window: ``(topic, window_start, records, max_partition_records,
    max_over_avg, alert)``; the average is over all the topic's partitions. ``df``: records,
    or a scan's window rows (``scan.Scan.windows``, counted with the same ``window_ms``)."""
    common.require(window_ms > 0, f"window_ms must be > 0, got {window_ms}")
    spark = df.sparkSession
    n = spark.createDataFrame(sorted(partition_counts.items()) or [("", 0)], "topic string, n int")
    seen = df.groupBy("topic").agg((F.max("partition") + 1).alias("_seen"))
    if "window_start" in df.columns:      # a scan's window rows, counted per window and partition
        per = df.groupBy("topic", "window_start", "partition").agg(F.sum("records").alias("c"))
    else:
        per = (df.withColumn("window_start", F.floor(F.col("timestamp") / window_ms) * window_ms)
               .groupBy("topic", "window_start", "partition").agg(F.count(F.lit(1)).alias("c")))
    win = per.groupBy("topic", "window_start").agg(F.sum("c").alias("records"),
                                                   F.max("c").alias("max_partition_records"))
    win = win.join(seen, "topic").join(n, "topic", "left") \
             .withColumn("_n", F.greatest(F.coalesce("n", F.lit(0)), "_seen"))
    ratio = F.col("max_partition_records") / (F.col("records") / F.col("_n"))
    return (win.select("topic", F.col("window_start").cast("long").alias("window_start"),
                       F.col("records").cast("long").alias("records"),
                       F.col("max_partition_records").cast("long").alias("max_partition_records"),
                       ratio.alias("max_over_avg"))
            .withColumn("alert", F.col("max_over_avg") > F.lit(float(threshold))))


def broker_skew(data_dir: str, topics: Sequence[str], threshold: float = SKEW_THRESHOLD) -> Optional[dict]:
    """Per-broker replicas, leaders and bytes of ``topics`` in a cluster's data dir, their
    max/min and which are flagged above ``threshold`` (:func:`kafkasim.placement.skew.broker_skew`,
    the same figures ``kafkasim cluster describe`` shows); None when ``data_dir`` is not a
    cluster's (no ``meta/cluster.json``).

    Placement and leaders come from ``meta/cluster.json``; a replica's bytes are the sizes
    of its segment files under ``broker-<id>/<topic>-<p>/``, so they are measured per broker
    (a follower that lags stores less). Every broker of the cluster counts, idle ones too.
    """
    from kafkasim.placement.skew import broker_skew as placement_skew
    log_dir = LogDir(data_dir)
    cluster = log_dir.cluster()
    if cluster is None:
        return None
    wanted = set(topics)
    chosen = {tp: v for tp, v in cluster.partitions.items() if tp[0] in wanted}
    sizes = log_dir.replica_bytes(wanted)
    stored = {b: 0 for b in cluster.brokers}
    for (topic, p, b), n in sizes.items():
        if (topic, p) in chosen and b in chosen[(topic, p)][0]:    # a leftover dir of a moved replica: not counted
            stored[b] += n
    assignment = {TopicPartition(t, p): list(replicas) for (t, p), (replicas, _, _) in chosen.items()}
    leaders = {TopicPartition(t, p): leader for (t, p), (_, leader, _) in chosen.items()}
    rep = placement_skew(assignment, cluster.brokers, leaders, threshold=threshold).as_dict()
    for b in rep["brokers"]:
        b["bytes"] = stored[b["broker"]]
    ratio = max_min_ratio(stored.values())
    rep["ratios"]["bytes"] = "inf" if math.isinf(ratio) else round(ratio, 4)
    rep["flagged"]["bytes"] = ratio > threshold
    return rep


def broker_checks(brokers: Optional[dict]) -> list[dict]:
    """One check per per-broker measure (``broker replicas max/min`` ...): limit, ratio, passed."""
    if not brokers or "ratios" not in brokers:
        return []
    return [common.check(f"broker {m} max/min", brokers["threshold"], brokers["ratios"][m],
                         passed=not brokers["flagged"][m]) for m in ("replicas", "leaders", "bytes")]


def _row_dict(r) -> dict:
    return {k: (common.key_text(v) if k == "key" else v) for k, v in r.asDict().items()}


def report(stats: list[dict], overall: dict, per_topic: list[dict], hot: list[dict],
           windows: list[dict], *, max_over_avg_limit: float, window_threshold: float,
           corruption: Sequence[dict] = (), window_ms: int = 60_000,
           min_records_per_partition: Optional[int] = common.MIN_RECORDS_PER_PARTITION,
           brokers: Optional[dict] = None) -> dict:
    """The JSON report (schema in docs/spark-audits.md); ``brokers``: :func:`broker_skew`'s
    figures (None: not a cluster, the report carries a note)."""
    alerts = [w for w in windows if w["alert"]]
    worst_window = max((w["max_over_avg"] for w in windows), default=None)
    checks = [common.check("max/avg", max_over_avg_limit, overall.get("max_over_avg")),
              common.check("window max/avg", window_threshold, worst_window, passed=not alerts),
              common.check("corrupt batches", 0, len(corruption))]
    placement = broker_checks(brokers)
    checks += placement
    records = int(overall.get("total") or 0)
    rep = {
        "records": int(overall.get("total") or 0),
        "partitions": stats,
        "max_over_avg": overall.get("max_over_avg"),
        "max_over_min": overall.get("max_over_min"),
        "drift_pct": overall.get("drift_pct"),
        "cv": overall.get("cv"),
        "gini": overall.get("gini"),
        "bytes": {k: overall.get("bytes_" + k) for k in ("max_over_avg", "gini")},
        "topics": per_topic,
        "hot_keys": hot,
        "windows": {"window_ms": window_ms, "threshold": window_threshold,
                    "alerts": len(alerts), "max_over_avg": worst_window,
                    "rows": windows},
        "brokers": brokers if brokers is not None else {"note": BROKER_NOTE},
        "limits": {"max_over_avg": max_over_avg_limit},
        "violations": {"max_over_avg": int((overall.get("max_over_avg") or 0) > max_over_avg_limit),
                       "window_alerts": len(alerts)},
        "corrupt_batches": list(corruption),
        "checks": checks,
    }
    rep.update(common.verdict_of(checks, records=records, partitions=len(stats),
                                 min_per_partition=min_records_per_partition or None,
                                 facts=len(corruption) + sum(not c["passed"] for c in placement)))
    return rep


def build_report(spark, data_dir: str, topics: list[str], *, top_k: int = 10, window_ms: int = 60_000,
                 window_threshold: float = 5.0, max_over_avg_limit: float = 1.3,
                 corrupt: str = "report", plot: Optional[str] = None,
                 min_records_per_partition: Optional[int] = common.MIN_RECORDS_PER_PARTITION,
                 scan=None, corruption: Optional[list] = None) -> dict:
    """Read → transform → collect: the skew report for ``topics`` under ``data_dir``.

    ``scan``/``corruption``: the one scan (``scan.Scan`` with ``window_ms`` in its spec) and
    the corrupt batches when the caller has them (``audit all``: one scan for every audit)."""
    from kafkasim.spark_jobs.partials import Spec
    from kafkasim.spark_jobs.scan import Scan
    counts = {t: n for t, n in common.topic_partition_counts(data_dir).items() if t in set(topics)}
    own = scan is None
    if own:
        scan = Scan(spark, data_dir, topics, Spec(window_ms=window_ms), corrupt)
    common.require(scan.spec.window_ms == window_ms,
                   f"the scan counted {scan.spec.window_ms} ms windows, the skew audit asks for {window_ms}")
    try:
        stats_df = partition_stats(scan.keys(), counts).persist(StorageLevel.MEMORY_AND_DISK)
        summaries_df = (skew_summary(stats_df, by=()).withColumn("_what", F.lit("records"))
                        .unionByName(skew_summary(stats_df, by=(), value="bytes").withColumn("_what", F.lit("bytes")),
                                     allowMissingColumns=True)
                        .unionByName(skew_summary(stats_df).withColumn("_what", F.lit("topic")),
                                     allowMissingColumns=True))
        got = collect_together({     # one Spark action for every figure of the report
            "stats": (stats_df, ["topic", "partition"]),
            "summaries": (summaries_df, []),
            "hot": (hot_keys(scan.keys(), top_k), [("records", False), "topic", "key"]),
            "windows": (window_skew(scan.windows(), counts, window_ms, window_threshold), ["topic", "window_start"]),
        })
        stats = [r.asDict() for r in got["stats"]]
        summaries = got["summaries"]
        overall = next((r.asDict() for r in summaries if r["_what"] == "records"), {})
        b = next((r for r in summaries if r["_what"] == "bytes"), None)
        if b:
            overall.update({"bytes_max_over_avg": b["max_over_avg"], "bytes_gini": b["gini"]})
        per_topic = sorted(({k: v for k, v in r.asDict().items() if k != "_what"} for r in summaries
                            if r["_what"] == "topic"), key=lambda r: r["topic"])
        overall.pop("_what", None)
        overall.pop("topic", None)
        stats_df.unpersist()
        hot = [_row_dict(r) for r in got["hot"]]
        windows = [r.asDict() for r in got["windows"]]
    finally:
        if own:
            scan.close()
    if corruption is None:
        corruption = common.corruption_of(spark, data_dir, topics)
    rep = report(stats, overall, per_topic, hot, windows, max_over_avg_limit=max_over_avg_limit,
                 window_threshold=window_threshold, corruption=corruption,
                 window_ms=window_ms, min_records_per_partition=min_records_per_partition,
                 brokers=broker_skew(data_dir, topics))
    if plot:
        rep["chart"] = common.plot_partitions(
            plot, [f"{s['topic']}-{s['partition']}" for s in stats], [s["records"] for s in stats],
            f"{', '.join(topics)}: records per partition (max/avg {_f(rep['max_over_avg'])}, "
            f"limit {max_over_avg_limit:g})", "records", limit_over_avg=max_over_avg_limit)
        rep["chart"]["path"] = plot
    return rep


def _f(x, fmt: str = ".3f") -> str:
    return "n/a" if x is None else format(x, fmt)


def text(rep: dict) -> str:
    lines = [f"skew audit: {rep['records']:,} records over {len(rep['partitions'])} partitions",
             f"  max/avg {_f(rep['max_over_avg'])}  max/min {_f(rep['max_over_min'])}  "
             f"drift {_f(rep['drift_pct'], '.1f')}%  cv {_f(rep['cv'])}  gini {_f(rep['gini'])}"]
    for s in rep["partitions"][:64]:
        lines.append(f"  {s['topic']}-{s['partition']:<4} {s['records']:>12,} records "
                     f"{s['bytes']:>14,} bytes  {100 * (s['share'] or 0):6.2f}%")
    if rep["hot_keys"]:
        lines.append("  hot keys:")
        for h in rep["hot_keys"]:
            lines.append(f"    {h['key']!s:32} {h['records']:>10,}  {100 * h['share']:6.2f}%  "
                         f"partition(s) {','.join(map(str, h['partitions']))}")
    w = rep["windows"]
    lines.append(f"  windows of {w['window_ms']} ms: worst max/avg {_f(w['max_over_avg'])}, "
                 f"{w['alerts']} above {w['threshold']}")
    b = rep["brokers"]
    if "note" in b:
        lines.append(f"  brokers: {b['note']}")
    else:
        r = b["ratios"]
        lines.append(f"  brokers (max/min, limit {b['threshold']:g}): replicas {r['replicas']}, "
                     f"leaders {r['leaders']}, bytes {r['bytes']}"
                     + (f"; idle: {', '.join(map(str, b['idle']))}" if b["idle"] else ""))
        for x in b["brokers"]:
            lines.append(f"    broker {x['broker']:<4} {x['replicas']:>6} replicas {x['leaders']:>6} leaders "
                         f"{x['bytes']:>14,} bytes")
    if rep["corrupt_batches"]:
        lines.append(f"  corrupt batches skipped: {len(rep['corrupt_batches'])}")
    lines += common.checks_text(rep)
    lines.append({common.VERDICT_OK: "  OK: within limits", common.VERDICT_FAILED: "  SKEW ABOVE LIMITS"}
                 .get(rep["verdict"], "  verdict: not enough data"))
    return "\n".join(lines)


violations = common.violations


def run(args, spark=None) -> int:
    data_dir = common.data_dir_of(args)
    topics = common.check_inputs(data_dir, args.topic)       # before the JVM starts
    spark = common.open_spark(args, spark, input_bytes=common.input_bytes(data_dir, topics))
    return common.run_job(args, lambda: build_report(
        spark, data_dir, topics, top_k=args.top_k, window_ms=args.window_ms,
        window_threshold=args.window_threshold, max_over_avg_limit=args.max_over_avg,
        corrupt=args.corrupt, plot=args.plot,
        min_records_per_partition=args.min_records_per_partition), text, violations)


def main(argv: Optional[Sequence[str]] = None, spark=None) -> int:
    p = common.job_parser("skew", "Audit partition, key and time skew.",
                          "spark-submit spark_jobs/skew.py --data-dir ./kafkasim-data --topic orders --plot skew.png")
    options.skew(p)
    return run(p.parse_args(argv), spark)


if __name__ == "__main__":
    sys.exit(main())
