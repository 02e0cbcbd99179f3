"""Co-partitioning audit: can two topics be joined on their key partition by partition?

Run it::

    spark-submit --py-files dist/kafkasim-jobs.zip spark_jobs/copartition.py --data-dir DIR --topic LEFT --topic RIGHT [--json OUT]

or ``kafkasim audit copartition --data-dir DIR --topic orders --topic payments``.
Exit code 0 when co-partitioned, 3 otherwise.

Two checks, as a Kafka Streams join requires:

1. ``partition_count_mismatch`` (0 or 1): the topics' partition counts (metadata) differ.
2. ``key_partition_mismatch``: keys present in both topics whose partition sets differ
   (a key on partition 2 of LEFT must be on partition 2 of RIGHT). One details row per
   key, with both partition lists.

Invariants: pure transforms. Thread-safety: no shared state.
"""

from __future__ import annotations

import sys
from typing import Optional, Sequence

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from kafkasim.spark_jobs import common, options

__all__ = ["key_partitions", "copartition_mismatches", "report", "main"]


def key_partitions(df: DataFrame, topic: str) -> DataFrame:
    """``(key, partitions: array<int>, records)`` of one topic's keyed records."""
    return (df.where((F.col("topic") == topic) & F.col("key").isNotNull()).groupBy("key")
            .agg(F.array_sort(F.collect_set("partition")).alias("partitions"),
                 F.count(F.lit(1)).alias("records")))


def copartition_mismatches(df: DataFrame, left: str, right: str) -> DataFrame:
    """``(key, left_partitions, right_partitions)`` for shared keys placed differently."""
    l_ = key_partitions(df, left).select("key", F.col("partitions").alias("left_partitions"))
    r_ = key_partitions(df, right).select("key", F.col("partitions").alias("right_partitions"))
    return l_.join(r_, "key").where(F.col("left_partitions") != F.col("right_partitions"))


def report(left: str, right: str, counts: dict[str, Optional[int]], shared_keys: int, mismatches: int,
           details: list[dict], corruption: Sequence[dict] = ()) -> dict:
    """The JSON report (schema in docs/spark-audits.md)."""
    lc, rc = counts.get(left), counts.get(right)
    return {
        "left": {"topic": left, "partitions": lc},
        "right": {"topic": right, "partitions": rc},
        "shared_keys": shared_keys,
        "violations": {"partition_count_mismatch": int(lc != rc),
                       "key_partition_mismatch": mismatches},
        "details": details,
        "corrupt_batches": list(corruption),
    }


def build_report(spark, data_dir: str, left: str, right: str, *, corrupt: str = "report",
                 max_details: int = 1000) -> dict:
    """Read → transform → collect: the co-partitioning report for two topics."""
    meta = common.topic_partition_counts(data_dir)
    df = common.read_log(spark, data_dir, [left, right], corrupt=corrupt).cache()
    try:
        shared = key_partitions(df, left).join(key_partitions(df, right), "key").count()
        bad = copartition_mismatches(df, left, right).cache()
        n_bad = bad.count()
        details = [{**r.asDict(), "key": common.key_text(r["key"])}
                   for r in bad.orderBy("key").limit(max_details).collect()]
        bad.unpersist()
    finally:
        df.unpersist()
    return report(left, right, {left: meta.get(left), right: meta.get(right)}, shared, n_bad, details,
                  common.corruption_of(spark, data_dir, [left, right]))


def text(rep: dict) -> str:
    l_, r_ = rep["left"], rep["right"]
    lines = [f"copartition {l_['topic']} ({l_['partitions']} partitions) vs {r_['topic']} "
             f"({r_['partitions']} partitions): {rep['shared_keys']:,} shared keys"]
    if rep["violations"]["partition_count_mismatch"]:
        lines.append("  partition counts differ")
    lines.append(f"  keys on different partitions: {rep['violations']['key_partition_mismatch']:,}")
    for d in rep["details"][:20]:
        lines.append(f"    {d['key']!s:32} {d['left_partitions']} vs {d['right_partitions']}")
    if rep["corrupt_batches"]:
        lines.append(f"  corrupt batches skipped: {len(rep['corrupt_batches'])}")
    lines.append("  OK: co-partitioned" if not violations(rep) else "  NOT CO-PARTITIONED")
    return "\n".join(lines)


violations = common.violations


def run(args, spark=None) -> int:
    data_dir = common.data_dir_of(args)
    common.require(args.topic is not None and len(args.topic) == 2,
                   "copartition needs exactly two topics: --topic LEFT --topic RIGHT")
    common.check_inputs(data_dir, args.topic)                # before the JVM starts
    spark = common.open_spark(args, spark)
    return common.run_job(args, lambda: build_report(
        spark, data_dir, args.topic[0], args.topic[1], corrupt=args.corrupt,
        max_details=args.max_details), text, violations)


def main(argv: Optional[Sequence[str]] = None, spark=None) -> int:
    p = common.job_parser("copartition", "Audit that two topics are co-partitioned on their keys.",
                          "spark-submit spark_jobs/copartition.py --data-dir ./kafkasim-data --topic orders --topic payments")
    options.copartition(p)
    return run(p.parse_args(argv), spark)


if __name__ == "__main__":
    sys.exit(main())
