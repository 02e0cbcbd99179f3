"""Repartition planner: what would change going from N to M partitions, and how many to have.

Run it::

    spark-submit --py-files dist/kafkasim-jobs.zip spark_jobs/repartition.py --data-dir DIR --topic T --to 12 [--target-peak-mbps 300] [--json OUT]

or ``kafkasim audit repartition --data-dir DIR --topic T --to 12``. Advisory: the exit code
is 0 unless ``--max-moved-traffic`` is given and passed (3), or batches are corrupt (3).

1. For the keys and traffic actually in the log (keyed records only), each key's
   partition under N (``--from``, default the current count) and under M (``--to``) is
   computed with the named partitioner (``murmur2`` by default, vectorised).
2. ``moved_key_fraction`` = keys whose partition changes / keys;
   ``moved_traffic_fraction`` = their records / keyed records (and the same for bytes).
   ``hot_keys_moving``: the top-K keys by records that change partition.
3. Recommended partition count for a peak of P MB/s (``--target-peak-mbps``, else the
   peak measured in the log: the most payload bytes in any one-second window, MB = 10⁶
   bytes): ``ceil(P / 50)`` partitions at 50 MB/s each, rounded up to the next power of
   two, then ×2 for headroom (:func:`recommended_partitions`). For P = 120:
   ceil(2.4) = 3 → 4 → 8.

Invariants: pure transforms. Thread-safety: no shared state.
"""

from __future__ import annotations

import math
import sys
from typing import Optional, Sequence

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from kafkasim.spark_jobs import common, options
from kafkasim.spark_jobs.skew import record_bytes

__all__ = ["key_traffic", "partition_moves", "peak_mb_per_s", "recommended_partitions",
           "report", "main", "MB_PER_S_PER_PARTITION"]

MB_PER_S_PER_PARTITION = 50.0


def recommended_partitions(peak_mb_per_s: float, per_partition: float = MB_PER_S_PER_PARTITION) -> int:
    """``next_pow2(ceil(peak / per_partition)) * 2`` (at least 2).

    >>> recommended_partitions(120), recommended_partitions(50), recommended_partitions(0)
    (8, 2, 2)
    """
    if peak_mb_per_s < 0 or per_partition <= 0:
        raise ValueError(f"need peak >= 0 and per_partition > 0, got {peak_mb_per_s}, {per_partition}")
    need = max(1, math.ceil(peak_mb_per_s / per_partition))
    return (1 << (need - 1).bit_length()) * 2


def key_traffic(df: DataFrame) -> DataFrame:
    """``(topic, key, records, bytes)`` for every keyed record's key."""
    return (df.where(F.col("key").isNotNull()).groupBy("topic", "key")
            .agg(F.count(F.lit(1)).alias("records"), F.sum(record_bytes()).alias("bytes")))


def partition_moves(traffic: DataFrame, n_from: int, n_to: int, partitioner: str = "murmur2") -> DataFrame:
    """``traffic`` plus ``from_partition``, ``to_partition`` and ``moves`` (boolean)."""
    common.require(n_from >= 1 and n_to >= 1, f"partition counts must be >= 1, got {n_from} -> {n_to}")
    with_counts = traffic.withColumn("_counts", F.array(F.lit(n_from), F.lit(n_to)))
    hashed = common.partition_for_keys(with_counts, "_counts", partitioner)
    return (hashed.withColumn("from_partition", F.col("expected")[0])
            .withColumn("to_partition", F.col("expected")[1])
            .withColumn("moves", F.col("from_partition") != F.col("to_partition"))
            .drop("_counts", "expected"))


def peak_mb_per_s(df: DataFrame) -> DataFrame:
    """One row ``(peak_mb_per_s, peak_second_ms)``: the busiest one-second window's payload MB."""
    per_s = (df.withColumn("_s", F.floor(F.col("timestamp") / 1000))
             .groupBy("_s").agg(F.sum(record_bytes()).alias("_b")))
    return per_s.agg(F.coalesce(F.max("_b") / 1e6, F.lit(0.0)).alias("peak_mb_per_s"),
                     (F.max_by("_s", "_b") * 1000).alias("peak_second_ms"))


def report(summary: dict, hot: list[dict], *, n_from: int, n_to: int, peak: float, measured_peak: float,
           target_given: bool, max_moved_traffic: Optional[float], corruption: Sequence[dict] = ()) -> dict:
    """The JSON report (schema in docs/spark-audits.md)."""
    keys, records = summary.get("keys") or 0, summary.get("records") or 0
    moved_traffic = (summary.get("moved_records") or 0) / records if records else 0.0
    return {
        "from_partitions": n_from,
        "to_partitions": n_to,
        "keys": keys,
        "keyed_records": records,
        "moved_keys": summary.get("moved_keys") or 0,
        "moved_key_fraction": (summary.get("moved_keys") or 0) / keys if keys else 0.0,
        "moved_traffic_fraction": moved_traffic,
        "moved_bytes_fraction": ((summary.get("moved_bytes") or 0) / summary["bytes"]) if summary.get("bytes") else 0.0,
        "hot_keys_moving": hot,
        "peak_mb_per_s": peak,
        "peak_source": "target" if target_given else "measured",
        "measured_peak_mb_per_s": measured_peak,
        "mb_per_s_per_partition": MB_PER_S_PER_PARTITION,
        "recommended_partitions": recommended_partitions(peak),
        "violations": {"moved_traffic_over_limit": int(max_moved_traffic is not None and moved_traffic > max_moved_traffic)},
        "corrupt_batches": list(corruption),
    }


def build_report(spark, data_dir: str, topic: str, n_to: int, *, n_from: Optional[int] = None,
                 partitioner: str = "murmur2", target_peak: Optional[float] = None, top_k: int = 10,
                 max_moved_traffic: Optional[float] = None, corrupt: str = "report") -> dict:
    """Read → transform → collect: the repartition report for one topic."""
    counts = common.topic_partition_counts(data_dir)
    if n_from is None:
        common.require(topic in counts, f"topic {topic!r} has no metadata under {data_dir!r}; pass --from")
        n_from = counts[topic]
    df = common.read_log(spark, data_dir, [topic], corrupt=corrupt)
    moves = partition_moves(key_traffic(df), n_from, n_to, partitioner).cache()
    try:
        s = moves.agg(F.count(F.lit(1)).alias("keys"), F.sum("records").alias("records"),
                      F.sum("bytes").alias("bytes"),
                      F.sum(F.col("moves").cast("int")).alias("moved_keys"),
                      F.sum(F.when(F.col("moves"), F.col("records"))).alias("moved_records"),
                      F.sum(F.when(F.col("moves"), F.col("bytes"))).alias("moved_bytes")).first().asDict()
        hot = [{**r.asDict(), "key": common.key_text(r["key"])} for r in
               moves.where("moves").orderBy(F.desc("records"), "key").limit(top_k)
               .select("key", "records", "bytes", "from_partition", "to_partition").collect()]
    finally:
        moves.unpersist()
    measured = float(peak_mb_per_s(df).first()["peak_mb_per_s"] or 0.0)
    peak = float(target_peak) if target_peak is not None else measured
    return report(s, hot, n_from=n_from, n_to=n_to, peak=peak, measured_peak=measured,
                  target_given=target_peak is not None, max_moved_traffic=max_moved_traffic,
                  corruption=common.corruption_of(spark, data_dir, [topic]))


def text(rep: dict) -> str:
    lines = [f"repartition {rep['from_partitions']} -> {rep['to_partitions']}: "
             f"{rep['moved_keys']:,} of {rep['keys']:,} keys move ({100 * rep['moved_key_fraction']:.1f}%), "
             f"{100 * rep['moved_traffic_fraction']:.1f}% of keyed traffic"]
    for h in rep["hot_keys_moving"]:
        lines.append(f"  hot key {h['key']!s:32} {h['records']:>10,} records  {h['from_partition']} -> {h['to_partition']}")
    lines.append(f"  peak {rep['peak_mb_per_s']:.3f} MB/s ({rep['peak_source']}) at "
                 f"{rep['mb_per_s_per_partition']:.0f} MB/s per partition: "
                 f"recommend {rep['recommended_partitions']} partitions")
    if rep["corrupt_batches"]:
        lines.append(f"  corrupt batches skipped: {len(rep['corrupt_batches'])}")
    return "\n".join(lines)


violations = common.violations


def run(args, spark=None) -> int:
    data_dir = common.data_dir_of(args)
    common.require(args.topic is not None and len(args.topic) == 1, "repartition needs exactly one --topic")
    common.check_inputs(data_dir, args.topic)                # before the JVM starts
    spark = common.open_spark(args, spark)
    return common.run_job(args, lambda: build_report(
        spark, data_dir, args.topic[0], args.to, n_from=args.n_from, partitioner=args.partitioner,
        target_peak=args.target_peak_mbps, top_k=args.top_k, max_moved_traffic=args.max_moved_traffic,
        corrupt=args.corrupt), text, violations)


def main(argv: Optional[Sequence[str]] = None, spark=None) -> int:
    p = common.job_parser("repartition", "Plan a partition count change: what moves, and how many to have.",
                          "spark-submit spark_jobs/repartition.py --data-dir ./kafkasim-data --topic orders --to 12")
    options.repartition(p)
    return run(p.parse_args(argv), spark)


if __name__ == "__main__":
    sys.exit(main())
