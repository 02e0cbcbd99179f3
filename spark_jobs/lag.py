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

import sys
from typing import Optional, Sequence

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from kafkasim.spark_jobs import common, options

__all__ = ["committed_offsets", "log_end", "group_lag", "uncommitted_partitions", "report", "main",
           "OFFSETS_TOPIC"]

OFFSETS_TOPIC = "__consumer_offsets"
_COMMITS = "group string, topic string, partition int, committed_offset long, metadata string, commit_timestamp long, tombstone boolean, _p int, _o long"


def committed_offsets(offsets_records: DataFrame) -> DataFrame:
    """``(group, topic, partition, committed_offset, metadata, commit_timestamp)``: the latest
    live commit per key from the records of ``__consumer_offsets``."""
    import pyarrow as pa

    def decode(batches):
        from kafkasim.protocol.offsets import OffsetKey, decode_record
        for b in batches:
            keys, values = b.column("key").to_pylist(), b.column("value").to_pylist()
            parts, offs = b.column("partition").to_pylist(), b.column("offset").to_pylist()
            rows = {n: [] for n in ("group", "topic", "partition", "committed_offset", "metadata",
                                    "commit_timestamp", "tombstone", "_p", "_o")}
            for k, v, p, o in zip(keys, values, parts, offs):
                if k is None:
                    continue
                key, val = decode_record(k, v)
                if not isinstance(key, OffsetKey):
                    continue
                for name, x in (("group", key.group), ("topic", key.topic), ("partition", key.partition),
                                ("committed_offset", val.offset if val else None),
                                ("metadata", val.metadata if val else None),
                                ("commit_timestamp", val.commit_timestamp if val else None),
                                ("tombstone", val is None), ("_p", p), ("_o", o)):
                    rows[name].append(x)
            yield pa.RecordBatch.from_pydict(rows, schema=pa.schema([
                ("group", pa.string()), ("topic", pa.string()), ("partition", pa.int32()),
                ("committed_offset", pa.int64()), ("metadata", pa.string()),
                ("commit_timestamp", pa.int64()), ("tombstone", pa.bool_()), ("_p", pa.int32()),
                ("_o", pa.int64())]))

    decoded = offsets_records.select("partition", "offset", "key", "value").mapInArrow(decode, _COMMITS)
    latest = decoded.groupBy("group", "topic", "partition").agg(
        F.max_by(F.struct("committed_offset", "metadata", "commit_timestamp", "tombstone"),
                 F.struct("_p", "_o")).alias("c"))
    return latest.where(~F.col("c.tombstone")).select(
        "group", "topic", "partition", "c.committed_offset", "c.metadata", "c.commit_timestamp")


def log_end(df: DataFrame) -> DataFrame:
    """``(topic, partition, log_end_offset, log_end_timestamp)`` of each partition with records."""
    return df.groupBy("topic", "partition").agg(
        (F.max("offset") + 1).alias("log_end_offset"),
        F.max_by("timestamp", "offset").alias("log_end_timestamp"))


def group_lag(committed: DataFrame, df: DataFrame) -> DataFrame:
    """Lag per (group, topic, partition) — see the module docstring, step 3."""
    ends = log_end(df)
    c = committed.join(ends, ["topic", "partition"], "left")
    nxt = (c.select("group", "topic", "partition", "committed_offset")
           .join(df.select("topic", "partition", "offset", "timestamp"), ["topic", "partition"])
           .where(F.col("offset") >= F.col("committed_offset"))
           .groupBy("group", "topic", "partition")
           .agg(F.min_by("timestamp", "offset").alias("committed_timestamp")))
    out = c.join(nxt, ["group", "topic", "partition"], "left")
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


def uncommitted_partitions(committed: DataFrame, df: DataFrame, partition_counts: dict[str, int]) -> DataFrame:
    """``(group, topic, partition, log_end_offset)``: the partitions (of the topic metadata,
    plus any holding records) of each topic a group committed to, without a commit of that
    group; ``log_end_offset`` 0 for an empty partition."""
    spark = committed.sparkSession
    every = spark.createDataFrame([(t, p) for t, n in sorted(partition_counts.items()) for p in range(n)]
                                  or [("", -1)], "topic string, partition int")
    ends = log_end(df)
    parts = every.unionByName(ends.select("topic", "partition")).distinct()
    pairs = committed.select("group", "topic").distinct()
    missing = (pairs.join(parts, "topic")
               .join(committed.select("group", "topic", "partition"), ["group", "topic", "partition"], "left_anti"))
    return (missing.join(ends, ["topic", "partition"], "left")
            .select("group", "topic", "partition",
                    F.coalesce("log_end_offset", F.lit(0)).cast("long").alias("log_end_offset")))


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
                 corrupt: str = "report", plot: Optional[str] = None) -> dict:
    """Read → transform → collect: the lag report."""
    found = OFFSETS_TOPIC in common.topic_partition_counts(data_dir)
    offsets = common.read_log(spark, data_dir, [OFFSETS_TOPIC], corrupt=corrupt)
    committed = committed_offsets(offsets)
    if groups:
        committed = committed.where(F.col("group").isin(list(groups)))
    if topics:
        committed = committed.where(F.col("topic").isin(list(topics)))
    targets = sorted({r["topic"] for r in committed.select("topic").distinct().collect()})
    rows, no_commit = [], []
    if targets:
        df = common.read_log(spark, data_dir, targets, corrupt=corrupt)
        rows = [r.asDict() for r in group_lag(committed, df).orderBy("group", "topic", "partition").collect()]
        counts = {t: n for t, n in common.topic_partition_counts(data_dir).items() if t in set(targets)}
        no_commit = [r.asDict() for r in uncommitted_partitions(committed, df, counts)
                     .orderBy("group", "topic", "partition").collect()]
    rep = report(rows, max_lag_records=max_lag_records, max_lag_ms=max_lag_ms,
                 corruption=common.corruption_of(spark, data_dir, [OFFSETS_TOPIC] + targets),
                 offsets_topic_found=found, no_commit=no_commit)
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
    if rep["corrupt_batches"]:
        lines.append(f"  corrupt batches skipped: {len(rep['corrupt_batches'])}")
    lines += common.checks_text(rep)
    lines.append("  OK" if rep.get("verdict", common.VERDICT_OK) != common.VERDICT_FAILED else "  LAG ABOVE LIMITS")
    return "\n".join(lines)


violations = common.violations


def run(args, spark=None) -> int:
    data_dir = common.data_dir_of(args)
    common.check_inputs(data_dir, args.topic)                # before the JVM starts
    spark = common.open_spark(args, spark)
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
