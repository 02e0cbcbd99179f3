"""Lag audit: how far behind is each consumer group, in records and in time?

Run it::

    spark-submit --py-files dist/kafkasim-jobs.zip spark_jobs/lag.py --data-dir DIR [--group G] [--json OUT] [--plot OUT.png]

or ``kafkasim audit lag --data-dir DIR``. Exit code 0, or 3 when a lag passes
``--max-lag-records`` / ``--max-lag-ms`` (no limit by default) or batches are corrupt.

1. The committed offsets are read from the internal topic ``__consumer_offsets``
   (records decoded by ``kafkasim.protocol.offsets``, the one codec of that topic):
   per (group, topic, partition) the record with the highest offset wins and a tombstone
   deletes the commit (the topic is compacted; this is what compaction would keep).
2. Per partition of the log: ``log_end_offset`` = last offset + 1 and
   ``log_end_timestamp`` = the timestamp of the last record.
3. ``lag_records`` = max(0, log_end_offset − committed_offset); ``committed_timestamp`` =
   the timestamp of the first record at or after the committed offset (the next record
   the group will read); ``lag_ms`` = max(0, log_end_timestamp − committed_timestamp),
   0 when the group is caught up. Partitions with a commit are in ``partitions``.
4. ``no_commit``: every other partition (from the topic metadata) of a topic the group
   committed to, with its ``log_end_offset`` — ``kafka-consumer-groups --describe`` shows
   ``-`` as their current offset and lag; the text does too.

Invariants: pure transforms. Thread-safety: no shared state.
"""

from __future__ import annotations

import os
import sys
from typing import Optional, Sequence

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from kafkasim.spark_jobs import common, options
from kafkasim.spark_jobs.collect import collect_together

__all__ = ["read_commits", "latest", "marks", "lag_history", "history_summary", "plot_history",
           "group_lag", "uncommitted_partitions", "report", "main",
           "OFFSETS_TOPIC"]

OFFSETS_TOPIC = "__consumer_offsets"
HISTORY_ROWS = 5000   # at most this many lag-history rows in the JSON report (the summary is complete)
from kafkasim.spark_jobs.offset_commits import COMMITS_SCHEMA as _COMMITS  # noqa: E402
_COMMIT_FIELDS = [f.split(" ")[0] for f in _COMMITS.split(", ")]


def read_commits(spark, data_dir: str, topics: Optional[Sequence[str]] = None,
                 groups: Optional[Sequence[str]] = None, corrupt: str = "report") -> list[dict]:
    """Every offset commit (``_COMMITS`` fields) of ``groups`` to ``topics`` (None: all), in
    the order they sit in ``__consumer_offsets`` (partition, offset); [] without that topic."""
    if OFFSETS_TOPIC not in common.topic_partition_counts(data_dir):
        return []
    commits = common.read_log(spark, data_dir, [OFFSETS_TOPIC], corrupt=corrupt, mode="commits")
    if groups:
        commits = commits.where(F.col("group").isin(list(groups)))
    if topics:
        commits = commits.where(F.col("topic").isin(list(topics)))
    return [r.asDict() for r in commits.orderBy("_p", "_o").collect()]


def latest(commits: Sequence[dict]) -> list[dict]:
    """Per (group, topic, partition) the commit that sits last in ``__consumer_offsets`` (highest
    partition, then offset — the one compaction keeps), unless it is a tombstone; sorted."""
    last: dict[tuple, dict] = {}
    for c in commits:
        k = (c["group"], c["topic"], c["partition"])
        if k not in last or (c["_p"], c["_o"]) > (last[k]["_p"], last[k]["_o"]):
            last[k] = c
    return [{f: c[f] for f in ("group", "topic", "partition", "committed_offset", "metadata", "commit_timestamp")}
            for k, c in sorted(last.items()) if not c["tombstone"]]


def marks(commits: Sequence[dict]) -> dict[tuple[str, int], tuple[list[int], list[int]]]:
    """The look-ups a scan must answer for the lag audit (``partials.Spec.marks``): per
    (topic, partition), the latest committed offsets and every live commit's time."""
    out: dict[tuple[str, int], tuple[list[int], list[int]]] = {}
    for c in latest(commits):
        out.setdefault((c["topic"], c["partition"]), ([], []))[0].append(int(c["committed_offset"]))
    for c in commits:
        if not c["tombstone"] and c["commit_timestamp"] is not None:
            out.setdefault((c["topic"], c["partition"]), ([], []))[1].append(int(c["commit_timestamp"]))
    return out


def group_lag(committed: DataFrame, scan) -> DataFrame:
    """Lag per (group, topic, partition) — see the module docstring, step 3 (``scan``: a
    ``scan.Scan`` whose spec holds the committed offsets as marks)."""
    c = committed.join(scan.log_end(), ["topic", "partition"], "left")
    nxt = scan.next_records().select("topic", "partition", F.col("mark").alias("committed_offset"),
                                     F.col("timestamp").alias("committed_timestamp"))
    out = c.join(nxt, ["topic", "partition", "committed_offset"], "left")
    leo = F.coalesce("log_end_offset", F.lit(0))
    lag = F.greatest(leo - F.col("committed_offset"), F.lit(0))
    return out.select(
        "group", "topic", "partition", "committed_offset",
        leo.cast("long").alias("log_end_offset"),
        lag.cast("long").alias("lag_records"),
        "committed_timestamp", "log_end_timestamp",
        F.when(lag > 0, F.greatest(F.col("log_end_timestamp") - F.col("committed_timestamp"), F.lit(0)))
         .otherwise(F.lit(0)).cast("long").alias("lag_ms"),
        "commit_timestamp")


def uncommitted_partitions(committed: DataFrame, ends: DataFrame, partition_counts: dict[str, int]) -> DataFrame:
    """``(group, topic, partition, log_end_offset)``: the partitions (of the topic metadata,
    plus any holding records: ``ends``, ``scan.Scan.log_end``'s columns) of each topic a group
    committed to, without a commit of that group; ``log_end_offset`` 0 for an empty partition."""
    spark = committed.sparkSession
    every = spark.createDataFrame([(t, p) for t, n in sorted(partition_counts.items()) for p in range(n)]
                                  or [("", -1)], "topic string, partition int")
    parts = every.unionByName(ends.select("topic", "partition")).distinct()
    pairs = committed.select("group", "topic").distinct()
    missing = (pairs.join(parts, "topic")
               .join(committed.select("group", "topic", "partition"), ["group", "topic", "partition"], "left_anti"))
    return (missing.join(ends, ["topic", "partition"], "left")
            .select("group", "topic", "partition",
                    F.coalesce("log_end_offset", F.lit(0)).cast("long").alias("log_end_offset")))


def lag_history(commits: DataFrame, scan) -> DataFrame:
    """``(group, topic, partition, commit_timestamp, committed_offset, log_end_offset, lag_records)``:
    one row per live commit, the lag it left — the log end offset at the commit's time (1 +
    the highest offset whose record timestamp is ≤ it, from the scan's ``end`` look-ups)
    minus the committed offset, at least 0."""
    ends = scan.ends().select("topic", "partition", F.col("mark").alias("commit_timestamp"), "offset")
    live = commits.where(~F.col("tombstone")).select("group", "topic", "partition", "commit_timestamp",
                                                     "committed_offset")
    leo = F.coalesce(F.col("offset") + 1, F.lit(0)).cast("long")
    return (live.join(ends, ["topic", "partition", "commit_timestamp"], "left")
            .select("group", "topic", "partition", "commit_timestamp", "committed_offset",
                    leo.alias("log_end_offset"),
                    F.greatest(leo - F.col("committed_offset"), F.lit(0)).alias("lag_records")))


def history_summary(rows: Sequence[dict]) -> list[dict]:
    """Per (group, topic, partition) with two or more commits: ``commits``, ``first_lag``,
    ``last_lag``, ``max_lag`` and ``building`` (the lag grew from the first commit to the
    last and ends at its maximum) — sorted by ``last_lag``, largest first."""
    series: dict[tuple, list[int]] = {}
    for r in rows:
        series.setdefault((r["group"], r["topic"], r["partition"]), []).append(r["lag_records"])
    out = [{"group": g, "topic": t, "partition": p, "commits": len(lags), "first_lag": lags[0],
            "last_lag": lags[-1], "max_lag": max(lags), "building": lags[-1] > lags[0] and lags[-1] == max(lags)}
           for (g, t, p), lags in series.items() if len(lags) >= 2]
    return sorted(out, key=lambda s: (-s["last_lag"], s["group"], s["topic"], s["partition"]))


def plot_history(path: str, rows: Sequence[dict]) -> None:
    """PNG: lag (records) over time (seconds since the first commit), one line per partition."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    fig = Figure(figsize=(11, 4.5))
    FigureCanvasAgg(fig)
    ax = fig.subplots()
    t0 = min(r["commit_timestamp"] for r in rows)
    series: dict[tuple, list] = {}
    for r in rows:
        series.setdefault((r["group"], r["topic"], r["partition"]), []).append(r)
    for (g, t, p), pts in sorted(series.items()):
        ax.plot([(x["commit_timestamp"] - t0) / 1000 for x in pts], [x["lag_records"] for x in pts],
                marker=".", label=f"{g}: {t}-{p}")
    ax.set_xlabel("time since the first commit (s)")
    ax.set_ylabel("lag (records)")
    ax.set_title("consumer lag over time per partition, at each offset commit")
    ax.legend(loc="upper left", fontsize=7, ncol=2)
    fig.tight_layout()
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    fig.savefig(path, format="png", dpi=100)


def report(rows: list[dict], *, max_lag_records: Optional[int], max_lag_ms: Optional[int],
           corruption: Sequence[dict] = (), offsets_topic_found: bool = True,
           no_commit: Sequence[dict] = ()) -> dict:
    """The JSON report (schema in docs/spark-audits.md)."""
    groups: dict[str, dict] = {}
    for r in rows:
        g = groups.setdefault(r["group"], {"group": r["group"], "lag_records": 0, "max_lag_ms": 0, "partitions": 0})
        g["lag_records"] += r["lag_records"]
        g["max_lag_ms"] = max(g["max_lag_ms"], r["lag_ms"] or 0)
        g["partitions"] += 1
    over = [r for r in rows if (max_lag_records is not None and r["lag_records"] > max_lag_records)
            or (max_lag_ms is not None and (r["lag_ms"] or 0) > max_lag_ms)]
    max_records = max((r["lag_records"] for r in rows), default=0)
    max_ms = max((r["lag_ms"] or 0 for r in rows), default=0)
    checks = []
    if max_lag_records is not None:
        checks.append(common.check("lag records", max_lag_records, max_records))
    if max_lag_ms is not None:
        checks.append(common.check("lag ms", max_lag_ms, max_ms))
    checks.append(common.check("corrupt batches", 0, len(corruption)))
    rep = {
        "offsets_topic": OFFSETS_TOPIC,
        "offsets_topic_found": offsets_topic_found,
        "groups": sorted(groups.values(), key=lambda g: g["group"]),
        "partitions": rows,
        "no_commit": list(no_commit),
        "total_lag_records": sum(r["lag_records"] for r in rows),
        "max_lag_ms": max_ms,
        "limits": {"max_lag_records": max_lag_records, "max_lag_ms": max_lag_ms},
        "violations": {"lag_over_limit": len(over)},
        "corrupt_batches": list(corruption),
        "checks": checks,
    }
    rep.update(common.verdict_of(checks))
    return rep


def build_report(spark, data_dir: str, topics: Optional[list[str]], groups: Optional[list[str]] = None, *,
                 max_lag_records: Optional[int] = None, max_lag_ms: Optional[int] = None,
                 corrupt: str = "report", plot: Optional[str] = None, scan=None,
                 commits: Optional[list[dict]] = None, corruption: Optional[list] = None) -> dict:
    """Read → transform → collect: the lag report. ``commits``: :func:`read_commits` of these
    topics and groups, and ``scan``: a ``scan.Scan`` of the committed topics whose spec holds
    :func:`marks` of them, when the caller has them (``audit all``); ``corruption``: their
    corrupt batches."""
    from kafkasim.spark_jobs.partials import Spec
    from kafkasim.spark_jobs.scan import Scan
    found = OFFSETS_TOPIC in common.topic_partition_counts(data_dir)
    if commits is None:
        commits = read_commits(spark, data_dir, topics, groups, corrupt)
    live = latest(commits)
    targets = sorted({c["topic"] for c in live})
    rows, no_commit, history = [], [], []
    if targets:
        own = scan is None
        if own:
            scan = Scan(spark, data_dir, targets, Spec(marks=marks(commits)), corrupt)
        try:
            committed = spark.createDataFrame(
                [tuple(c.values()) for c in live],
                "group string, topic string, partition int, committed_offset long, metadata string, "
                "commit_timestamp long")
            all_commits = spark.createDataFrame([tuple(c[f] for f in _COMMIT_FIELDS) for c in commits], _COMMITS)
            counts = {t: n for t, n in common.topic_partition_counts(data_dir).items() if t in set(targets)}
            got = collect_together({        # one Spark action for the three tables of the report
                "rows": (group_lag(committed, scan), ["group", "topic", "partition"]),
                "no_commit": (uncommitted_partitions(committed, scan.log_end(), counts),
                              ["group", "topic", "partition"]),
                "history": (lag_history(all_commits, scan),
                            ["group", "topic", "partition", "commit_timestamp", "committed_offset"]),
            })
            rows, no_commit, history = ([r.asDict() for r in got[k]] for k in ("rows", "no_commit", "history"))
        finally:
            if own:
                scan.close()
    if corruption is None:
        corruption = common.corruption_of(spark, data_dir, [OFFSETS_TOPIC] + targets)
    else:
        corruption = [c for c in corruption if c["topic"] in {OFFSETS_TOPIC, *targets}]
    rep = report(rows, max_lag_records=max_lag_records, max_lag_ms=max_lag_ms, corruption=corruption,
                 offsets_topic_found=found, no_commit=no_commit)
    rep["history"] = {"commits": len(history), "partitions": history_summary(history),
                      "rows": history[:HISTORY_ROWS], "truncated": len(history) > HISTORY_ROWS}
    if plot and rep["history"]["partitions"]:
        rep["history"]["chart"] = os.path.splitext(plot)[0] + "-history.png"
        plot_history(rep["history"]["chart"], history)
    if plot:
        common.plot_partitions(plot, [f"{r['group']}:{r['topic']}-{r['partition']}" for r in rows],
                               [r["lag_records"] for r in rows], "consumer lag per partition (records)",
                               "lag (records)")
    return rep


def text(rep: dict) -> str:
    lines = [f"lag audit: {len(rep['groups'])} group(s), {len(rep['partitions'])} partition(s), "
             f"total lag {rep['total_lag_records']:,} records, max {rep['max_lag_ms']:,} ms"]
    if not rep["offsets_topic_found"]:
        lines.append(f"  no {OFFSETS_TOPIC} topic in this data dir: no committed offsets")
    for r in rep["partitions"][:100]:
        lines.append(f"  {r['group']:20} {r['topic']}-{r['partition']:<4} committed {r['committed_offset']:>10,} "
                     f"end {r['log_end_offset']:>10,}  lag {r['lag_records']:>10,} records {r['lag_ms']:>10,} ms")
    for r in rep.get("no_commit", [])[:100]:
        lines.append(f"  {r['group']:20} {r['topic']}-{r['partition']:<4} committed {'-':>10} "
                     f"end {r['log_end_offset']:>10,}  lag {'-':>10} (no commit)")
    hist = rep.get("history") or {}
    if hist.get("partitions"):
        building = [s for s in hist["partitions"] if s["building"]]
        lines.append(f"  lag history: {hist['commits']:,} commits; lag building on "
                     + (", ".join(f"{s['group']} {s['topic']}-{s['partition']} ({s['first_lag']:,} -> {s['last_lag']:,})"
                                  for s in building[:5]) or "no partition"))
        if hist.get("chart"):
            lines.append(f"  lag over time: {hist['chart']}")
    if rep["corrupt_batches"]:
        lines.append(f"  corrupt batches skipped: {len(rep['corrupt_batches'])}")
    lines += common.checks_text(rep)
    lines.append("  OK" if rep.get("verdict", common.VERDICT_OK) != common.VERDICT_FAILED else "  LAG ABOVE LIMITS")
    return "\n".join(lines)


violations = common.violations


def run(args, spark=None) -> int:
    data_dir = common.data_dir_of(args)
    common.check_inputs(data_dir, args.topic)                # before the JVM starts
    spark = common.open_spark(args, spark, input_bytes=common.input_bytes(data_dir, args.topic))
    return common.run_job(args, lambda: build_report(
        spark, data_dir, args.topic, args.group, max_lag_records=args.max_lag_records,
        max_lag_ms=args.max_lag_ms, corrupt=args.corrupt, plot=args.plot), text, violations)


def main(argv: Optional[Sequence[str]] = None, spark=None) -> int:
    p = common.job_parser("lag", "Audit consumer group lag from the committed offsets.",
                          "spark-submit spark_jobs/lag.py --data-dir ./kafkasim-data --plot lag.png")
    options.lag(p)
    return run(p.parse_args(argv), spark)


if __name__ == "__main__":
    sys.exit(main())
