"""Ordering audit: did every key keep its partition, its order, and the right partitioner?

Run it::

    spark-submit --py-files dist/kafkasim-jobs.zip spark_jobs/ordering.py --data-dir DIR [--topic T] [--json OUT]

or ``kafkasim audit ordering --data-dir DIR``. Exit code 0 when clean, 3 on violations.

Checks (one row per finding in :func:`ordering_details`, ``kind`` says which):

1. ``key_in_multiple_partitions`` — per topic, a keyed record's key should live in one
   partition. For a key seen in several, each partition after the first is a *move*:
   partitions are ordered by the (timestamp, offset) of the key's first record in them;
   the row gives the new partition and the first offset there (``partition``, ``offset``)
   and the partition it came from (``other_partition``: the one the key entered just
   before). The count is the number of keys that moved, the details one row per move.
2. Per (topic, producer, key), the send sequence (the producer-stamped headers
   ``kafkasim.producer`` / ``kafkasim.seq``, or a field of the value: JSON, or msgpack
   with ``--value-format msgpack``, :mod:`kafkasim.spark_jobs.values`) must rise by one
   with the offset. Records without producer identity or sequence are not checked.

   a. ``duplicate``: a sequence seen again; the first occurrence in (timestamp,
      partition, offset) order is the original (``other_partition/other_offset``), every
      later one is a duplicate (a non-idempotent retry).
   b. ``sequence_inversion``: within one partition, a record (not a duplicate) whose
      sequence is below the largest sequence of an earlier offset (``other_offset``).
   c. ``sequence_gap``: sequences missing between two consecutive distinct sequences of
      the key (across partitions, so a key that moved is not a gap); ``missing`` says
      how many, the row points at the record after the gap. Sequences below the first
      one seen are not gaps (retention may have deleted them).
3. ``partitioner_mismatch``: a keyed record whose partition is not what the named
   partitioner (default ``murmur2``: ``toPositive(murmur2(key)) % N``, Kafka's) picks
   for any partition count the topic plausibly had (:func:`partition_count_history`):
   the current count from ``meta/topics/<topic>.json``, every count of the topic's
   recorded ``partition_history`` there, plus each count before an add of partitions
   inferred from the data (for data dirs written before the broker kept the history). The
   count is of records; the details have one row per (topic, key, partition): ``offset``
   its first record, ``records`` how many, ``other_partition`` the expected partition
   under the current count.

4. ``input_order_inversion``: the output of a consumer that names its input record in the
   header ``kafkasim-input`` (``"<input partition>:<input offset>"``,
   :data:`kafkasim.types.INPUT_HEADER`; the labs' consume-transform-produce jobs write it).
   Per (topic, output partition, key, input partition), in output offset order, a record
   whose input offset is below the largest input offset of an earlier output record
   (``other_offset``: that earlier output record) — the key's records were processed out
   of their input order. Only the first output of each input record counts (a record
   processed again is not an inversion). A key whose input partition changed (the input
   topic's partition count grew) has no order across its input partitions and is not an
   inversion here: that is ``key_in_multiple_partitions`` on the input topic. The row
   carries ``input_partition``, ``input_offset`` and ``delivery_count`` (the header
   ``kafkasim-delivery-count`` a share-group consumer adds; null without it).

The checks read the audit's one scan (``scan.Scan``): key moves, the partition-count
history and the partitioner check need only each (key, partition)'s first record and
record count, the sequence and input-order checks the records with a sequence or an input header.

Invariants: transforms are pure and deterministic (ties broken by partition and offset).
Thread-safety: no shared state.
"""

from __future__ import annotations

import sys
from typing import Optional, Sequence

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

from kafkasim.storage.partition_history import counts_of
from kafkasim.types import DELIVERY_COUNT_HEADER, INPUT_HEADER, PRODUCER_HEADER, SEQUENCE_HEADER
from kafkasim.spark_jobs import common, options, values
from kafkasim.spark_jobs.collect import collect_together

__all__ = ["with_sequence", "key_moves", "sequence_violations", "with_input", "input_order_inversions",
           "partition_count_history",
           "partitioner_mismatches", "ordering_details", "report", "main", "KINDS", "round_robin"]

KINDS = ("key_in_multiple_partitions", "sequence_inversion", "sequence_gap", "duplicate",
         "partitioner_mismatch", "input_order_inversion")

_DETAIL_COLS = ["kind", "topic", "partition", "offset", "key", "producer", "sequence",
                "other_partition", "other_offset", "missing", "records", "input_partition", "input_offset",
                "delivery_count"]


def _details(df: DataFrame, kind: str, **cols) -> DataFrame:
    """Project ``df`` onto the details schema (missing columns null)."""
    types = {"partition": "int", "offset": "bigint", "key": "binary", "producer": "string",
             "sequence": "bigint", "other_partition": "int", "other_offset": "bigint",
             "missing": "bigint", "topic": "string", "records": "bigint", "input_partition": "int",
             "input_offset": "bigint", "delivery_count": "int"}
    out = [F.lit(kind).alias("kind")]
    for c in _DETAIL_COLS[1:]:
        expr = cols.get(c, F.col(c) if c in df.columns and c not in ("sequence", "records") else None)
        if c == "sequence" and c not in cols and "seq" in df.columns:
            expr = F.col("seq")
        out.append((expr if expr is not None else F.lit(None)).cast(types[c]).alias(c))
    return df.select(*out)


def with_sequence(df: DataFrame, source: str = "header", value_format: str = "json") -> DataFrame:
    """Add ``producer`` (string) and ``seq`` (long) for check 2.

    ``source``: ``header`` — ``kafkasim.producer`` / ``kafkasim.seq`` headers;
    ``value:FIELD`` — ``seq`` is the value's field ``FIELD`` and ``producer`` the
    ``kafkasim.producer`` header, else the batch's ``producer_id`` when it is >= 0.
    ``value_format`` (:mod:`kafkasim.spark_jobs.values`): ``json`` — a value that is not
    JSON, or a field that is missing or not an integer, gives null (the record is not
    checked); ``msgpack`` — a missing field gives null, a value that is not a msgpack map
    or a field that is not an integer raises RecordDeserializationError naming the offset.
    """
    producer = F.coalesce(common.header_value(PRODUCER_HEADER).cast("string"),
                          F.when(F.col("producer_id") >= 0, F.col("producer_id").cast("string")))
    if source == "header":
        seq = F.expr("try_cast(cast(" + _hdr_sql(SEQUENCE_HEADER) + " as string) as bigint)")
        return df.withColumn("producer", common.header_value(PRODUCER_HEADER).cast("string")) \
                 .withColumn("seq", seq)
    if source.startswith("value:") and len(source) > 6:
        field = source[6:].replace("'", "")
        if values.check_format(value_format) == "msgpack":
            name = field.replace("`", "")
            return (values.with_fields(df, "msgpack", f"`{name}` bigint", column="_fields")
                    .withColumn("producer", producer).withColumn("seq", F.col("_fields").getField(name))
                    .drop("_fields"))
        seq = F.expr(f"try_cast(get_json_object(cast(value as string), '$.{field}') as bigint)")
        return df.withColumn("producer", producer).withColumn("seq", seq)
    common.require(False, f"sequence source must be 'header' or 'value:FIELD', got {source!r}")


def _hdr_sql(name: str) -> str:
    return f"try_element_at(filter(headers, h -> h.key = '{name}'), -1).value"


def key_moves(df: DataFrame) -> DataFrame:
    """One ``key_in_multiple_partitions`` details row per move of a key to another partition."""
    firsts = (df.where(F.col("key").isNotNull())
              .groupBy("topic", "key", "partition")
              .agg(F.min(F.struct("timestamp", "offset")).alias("first")))
    w = Window.partitionBy("topic", "key").orderBy(F.col("first.timestamp"), "partition",
                                                   F.col("first.offset"))
    moves = (firsts.withColumn("other_partition", F.lag("partition").over(w))
             .where(F.col("other_partition").isNotNull())
             .withColumn("offset", F.col("first.offset")))
    return _details(moves, "key_in_multiple_partitions")


def sequence_violations(df: DataFrame) -> DataFrame:
    """Duplicate, inversion and gap rows for records with ``producer`` and ``seq`` (see
    :func:`with_sequence`)."""
    s = df.where(F.col("key").isNotNull() & F.col("producer").isNotNull() & F.col("seq").isNotNull()) \
          .select("topic", "partition", "offset", "timestamp", "key", "producer", "seq")
    w_same = Window.partitionBy("topic", "producer", "key", "seq").orderBy("timestamp", "partition", "offset")
    s = (s.withColumn("rn", F.row_number().over(w_same))
         .withColumn("orig_partition", F.first("partition").over(w_same))
         .withColumn("orig_offset", F.first("offset").over(w_same)))
    dups = _details(s.where(F.col("rn") > 1), "duplicate",
                    other_partition=F.col("orig_partition"), other_offset=F.col("orig_offset"))

    w_before = (Window.partitionBy("topic", "partition", "producer", "key").orderBy("offset")
                .rowsBetween(Window.unboundedPreceding, -1))
    inv = (s.withColumn("prev_max", F.max("seq").over(w_before))
           .withColumn("prev_max_offset", F.max_by("offset", "seq").over(w_before))
           .where((F.col("rn") == 1) & (F.col("seq") < F.col("prev_max"))))
    inversions = _details(inv, "sequence_inversion", other_partition=F.col("partition"),
                          other_offset=F.col("prev_max_offset"))

    w_seq = Window.partitionBy("topic", "producer", "key").orderBy("seq")
    firsts = s.where(F.col("rn") == 1)
    gaps = (firsts.withColumn("prev_seq", F.lag("seq").over(w_seq))
            .withColumn("prev_partition", F.lag("partition").over(w_seq))
            .withColumn("prev_offset", F.lag("offset").over(w_seq))
            .where(F.col("seq") - F.col("prev_seq") > 1))
    gap_rows = _details(gaps, "sequence_gap", other_partition=F.col("prev_partition"),
                        other_offset=F.col("prev_offset"),
                        missing=F.col("seq") - F.col("prev_seq") - 1)
    return dups.unionByName(inversions).unionByName(gap_rows)


def with_input(df: DataFrame) -> DataFrame:
    """Add ``input_partition`` (int), ``input_offset`` (long) from the last ``kafkasim-input``
    header (``"<partition>:<offset>"``; null when absent or not of that form) and
    ``delivery_count`` (int) from the last ``kafkasim-delivery-count`` header (null when absent)."""
    ref = F.expr("cast(" + _hdr_sql(INPUT_HEADER) + " as string)")
    parts = F.split(ref, ":")
    ok = ref.rlike("^[0-9]+:[0-9]+$")
    return (df.withColumn("input_partition", F.when(ok, parts.getItem(0).cast("int")))
            .withColumn("input_offset", F.when(ok, parts.getItem(1).cast("bigint")))
            .withColumn("delivery_count",
                        F.expr("try_cast(cast(" + _hdr_sql(DELIVERY_COUNT_HEADER) + " as string) as int)")))


def input_order_inversions(df: DataFrame) -> DataFrame:
    """``input_order_inversion`` rows (check 4) of records ``df`` (with ``headers``)."""
    s = (with_input(df).where(F.col("key").isNotNull() & F.col("input_offset").isNotNull())
         .select("topic", "partition", "offset", "timestamp", "key", "input_partition", "input_offset",
                 "delivery_count"))
    w_same = Window.partitionBy("topic", "key", "input_partition", "input_offset").orderBy(
        "timestamp", "partition", "offset")
    w_before = (Window.partitionBy("topic", "partition", "key", "input_partition").orderBy("offset")
                .rowsBetween(Window.unboundedPreceding, -1))
    firsts = s.withColumn("rn", F.row_number().over(w_same)).where(F.col("rn") == 1)
    inv = (firsts.withColumn("prev_max", F.max("input_offset").over(w_before))
           .withColumn("prev_max_offset", F.max_by("offset", "input_offset").over(w_before))
           .where(F.col("input_offset") < F.col("prev_max")))
    return _details(inv, "input_order_inversion", other_partition=F.col("partition"),
                    other_offset=F.col("prev_max_offset"))


def partition_count_history(df: DataFrame, current_counts: dict[str, int],
                            recorded: Optional[dict[str, list[dict]]] = None) -> DataFrame:
    """``(topic, partition_count)``: every partition count each topic plausibly had.

    Rule: every count of a topic's recorded history (``recorded``: topic → the
    ``partition_history`` of its metadata, :mod:`kafkasim.storage.partition_history`),
    the current count (metadata; or 1 + the highest partition seen when a topic
    has no metadata), plus, for every partition q > 0 such that all partitions ≥ q
    received their first record strictly after every partition < q received its first,
    the count ``1 + (highest partition < q holding data)`` — the count before an
    ``add partitions`` (new partitions are numbered after the old ones and fill later).
    """
    spark = df.sparkSession
    firsts = df.groupBy("topic", "partition").agg(F.min("timestamp").alias("first_ts"))
    before = Window.partitionBy("topic").orderBy("partition").rowsBetween(Window.unboundedPreceding, -1)
    after = Window.partitionBy("topic").orderBy("partition").rowsBetween(0, Window.unboundedFollowing)
    inferred = (firsts.withColumn("max_before", F.max("first_ts").over(before))
                .withColumn("highest_before", F.max("partition").over(before))
                .withColumn("min_after", F.min("first_ts").over(after))
                .where(F.col("max_before") < F.col("min_after"))
                .select("topic", (F.col("highest_before") + 1).cast("int").alias("partition_count")))
    seen = firsts.groupBy("topic").agg((F.max("partition") + 1).cast("int").alias("seen"))
    meta = spark.createDataFrame([(t, int(n)) for t, n in sorted(current_counts.items())],
                                 "topic string, meta_count int")
    current = (seen.join(meta, "topic", "left")
               .select("topic", F.coalesce("meta_count", "seen").alias("partition_count")))
    known = [(t, int(n)) for t, h in sorted((recorded or {}).items()) if h for n in counts_of(h)]
    if known:
        inferred = inferred.unionByName(spark.createDataFrame(known, "topic string, partition_count int"))
    return current.unionByName(inferred).distinct()


def _count_arrays(df: DataFrame, history: DataFrame, current_counts: dict[str, int]) -> DataFrame:
    """``(topic, counts)``: the plausible counts, the current one first."""
    cur = {t: int(n) for t, n in current_counts.items()}
    counts = history.groupBy("topic").agg(F.array_sort(F.collect_set("partition_count")).alias("all"))
    cur_df = df.sparkSession.createDataFrame(sorted(cur.items()) or [("", 0)], "topic string, cur int")
    return (counts.join(cur_df, "topic", "left")
            .select("topic", F.when(F.col("cur").isNotNull(),
                                    F.concat(F.array(F.col("cur")), F.array_remove("all", F.col("cur"))))
                    .otherwise(F.reverse("all")).alias("counts")))


def partitioner_mismatches(df: DataFrame, history: DataFrame, current_counts: dict[str, int],
                           partitioner: str = "murmur2") -> DataFrame:
    """``partitioner_mismatch`` rows: one per (topic, key, partition) whose keyed records no
    plausible count explains — ``offset`` the first of them, ``records`` how many. ``df``:
    records, or a scan's key rows (``scan.Scan.firsts``: ``records`` and ``min_offset``)."""
    counts = _count_arrays(df, history, current_counts)
    weighted = "records" in df.columns
    groups = (df.where(F.col("key").isNotNull()).groupBy("topic", "partition", "key")
              .agg((F.sum("records") if weighted else F.count(F.lit(1))).alias("records"),
                   F.min("min_offset" if weighted else "offset").alias("offset")))
    keyed = groups.join(F.broadcast(counts), "topic")
    hashed = common.partition_for_keys(keyed, "counts", partitioner)
    bad = hashed.where(~F.exists("expected", lambda e: e == F.col("partition")))
    return _details(bad, "partitioner_mismatch", other_partition=F.col("expected")[0], records=F.col("records"))


def ordering_details(df: DataFrame, current_counts: dict[str, int], *, sequence: str = "header",
                     partitioner: str = "murmur2", recorded: Optional[dict[str, list[dict]]] = None,
                     records: Optional[DataFrame] = None, value_format: str = "json") -> DataFrame:
    """Every finding of the four checks, one details row each (columns ``_DETAIL_COLS``);
    ``recorded``: the topics' partition-count histories (:func:`partition_count_history`).
    ``df``: the records, or a scan's key rows (``scan.Scan.firsts``) with the records the
    sequence checks read in ``records`` (None: no sequence checks); ``value_format``: of
    ``value:FIELD`` sequences (:func:`with_sequence`)."""
    history = partition_count_history(df, current_counts, recorded)
    out = key_moves(df).unionByName(partitioner_mismatches(df, history, current_counts, partitioner))
    seq_input = df if records is None and "records" not in df.columns else records
    if seq_input is not None:
        out = out.unionByName(sequence_violations(with_sequence(seq_input, sequence, value_format)))
        out = out.unionByName(input_order_inversions(seq_input))
    return out


ROUND_ROBIN_ORDER = ("_rank", "kind")


def round_robin(details: DataFrame) -> DataFrame:
    """``details`` ordered so that kinds alternate: the 1st of every kind, then the 2nd, ...
    (within a kind by topic, partition, offset), with that rank kept as column ``_rank``
    (:data:`ROUND_ROBIN_ORDER` sorts by it again after ``collect_together``)."""
    w = Window.partitionBy("kind").orderBy("topic", "partition", "offset")
    return details.withColumn("_rank", F.row_number().over(w)).orderBy(*ROUND_ROBIN_ORDER)


def report(records: int, keys: int, counts: dict[str, int], details: list[dict],
           corruption: Sequence[dict] = (), max_details: Optional[int] = None, *,
           partitions: Optional[int] = None,
           min_records_per_partition: Optional[int] = common.MIN_RECORDS_PER_PARTITION,
           causes: Sequence[dict] = (), detail_rows: Optional[int] = None) -> dict:
    """The JSON report (schema in docs/spark-audits.md). ``partitions``: how many partitions
    were audited (for the sample floor; None: no floor); ``detail_rows``: how many details
    rows were found in all (default: the sum of ``counts``)."""
    v = {k: int(counts.get(k, 0)) for k in KINDS}
    checks = [common.check(k, 0, v[k]) for k in KINDS] + [common.check("corrupt batches", 0, len(corruption))]
    rep = {
        "records": int(records),
        "keys": int(keys),
        "violations": v,
        "details": details,
        "details_truncated": max_details is not None and (
            sum(counts.values()) if detail_rows is None else detail_rows) > len(details),
        "corrupt_batches": list(corruption),
        "checks": checks,
        "causes": list(causes),
    }
    rep.update(common.verdict_of(checks, records=records, partitions=partitions,
                                 min_per_partition=(min_records_per_partition or None) if partitions else None,
                                 facts=sum(v.values()) + len(corruption)))
    return rep


def build_report(spark, data_dir: str, topics: list[str], *, sequence: str = "header",
                 partitioner: str = "murmur2", corrupt: str = "report",
                 max_details: int = 1000,
                 min_records_per_partition: Optional[int] = common.MIN_RECORDS_PER_PARTITION,
                 scan=None, corruption: Optional[list] = None, value_format: str = "json") -> dict:
    """Read → transform → collect: the ordering report for ``topics`` under ``data_dir``
    (``scan``/``corruption``: the one scan, whose spec reads ``sequence``, and the corrupt
    batches, when the caller has them, as in ``skew``; ``value_format``: how values are
    encoded, for ``sequence=value:FIELD``; a msgpack value that does not decode raises
    RecordDeserializationError naming its offset)."""
    from pyspark import StorageLevel
    from kafkasim.spark_jobs.causes import causes_of
    from kafkasim.spark_jobs.partials import Spec
    from kafkasim.spark_jobs.scan import Scan
    own = scan is None
    if own:
        scan = Scan(spark, data_dir, topics, Spec(sequence=sequence), corrupt)
    common.require(scan.spec.sequence == sequence,
                   f"the scan read sequences from {scan.spec.sequence!r}, the ordering audit from {sequence!r}")
    try:
        firsts = scan.firsts()
        sizes = dict(scan.totals(), sequenced=0, with_input=0)
        if sizes["record_rows"]:
            keyed = F.col("key").isNotNull()
            n = with_input(with_sequence(scan.records(), sequence, value_format)).agg(
                F.count(F.when(keyed & F.col("producer").isNotNull() & F.col("seq").isNotNull(), 1)).alias("s"),
                F.count(F.when(keyed & F.col("input_offset").isNotNull(), 1)).alias("i")).first()
            sizes["sequenced"], sizes["with_input"] = n["s"], n["i"]
        current = {t: n for t, n in common.topic_partition_counts(data_dir).items() if t in set(topics)}
        recorded = {t: h for t, h in common.topic_partition_histories(data_dir).items() if t in set(topics)}
        records = scan.records() if sizes["sequenced"] or sizes["with_input"] else None
        details = ordering_details(firsts, current, sequence=sequence, partitioner=partitioner, recorded=recorded,
                                   records=records, value_format=value_format).persist(StorageLevel.MEMORY_AND_DISK)
        found = details.groupBy("kind").agg(
            F.when(F.first("kind") == "key_in_multiple_partitions", F.count_distinct("topic", "key"))
             .when(F.first("kind") == "partitioner_mismatch", F.sum("records"))
             .otherwise(F.count(F.lit(1))).alias("n"), F.count(F.lit(1)).alias("rows"))
        got = collect_together({     # one Spark action for the counts and the details shown
            "found": (found, ["kind"]),
            "rows": (round_robin(details).limit(max_details), list(ROUND_ROBIN_ORDER))})
        counts = {r["kind"]: r["n"] for r in got["found"]}
        detail_rows = sum(r["rows"] for r in got["found"])
        rows = got["rows"]
        details.unpersist()
        causes = (causes_of(firsts, current, counts, partitioner=partitioner, sequence=sequence, recorded=recorded,
                            records=records, value_format=value_format) if counts else [])
    finally:
        if own:
            scan.close()
    out = [{k: (common.key_text(v) if k == "key" else v) for k, v in r.asDict().items()
            if v is not None and k != "_rank"} for r in rows]
    if corruption is None:
        corruption = common.corruption_of(spark, data_dir, topics)
    rep = report(sizes["records"], sizes["keys"], counts, out, corruption, max_details,
                 partitions=sum(current.values()) or None, min_records_per_partition=min_records_per_partition,
                 causes=causes, detail_rows=detail_rows)
    rep["sequenced_records"] = int(sizes["sequenced"])
    rep["input_records"] = int(sizes["with_input"])
    return rep


def text(rep: dict) -> str:
    v = rep["violations"]
    lines = [f"ordering audit: {rep['records']:,} records, {rep['keys']:,} keys, "
             f"{rep.get('sequenced_records', 0):,} with producer and sequence, "
             f"{rep.get('input_records', 0):,} naming their input record"]
    lines += [f"  {k:28} {v[k]:>8,}" for k in KINDS]
    if rep["corrupt_batches"]:
        lines.append(f"  corrupt batches skipped      {len(rep['corrupt_batches']):>8,}")
    from kafkasim.spark_jobs.causes import cause_text
    for c in rep.get("causes", ()):
        lines.append("  cause: " + cause_text(c))
    for d in rep["details"][:20]:
        lines.append("  - " + " ".join(f"{k}={d[k]}" for k in _DETAIL_COLS if k in d))
    if len(rep["details"]) > 20:
        lines.append(f"  ... {len(rep['details']) - 20} more in the JSON report")
    lines += common.checks_text(rep)
    lines.append({common.VERDICT_OK: "  OK: no violations", common.VERDICT_FAILED: "  VIOLATIONS FOUND"}
                 .get(rep["verdict"], "  verdict: not enough data"))
    return "\n".join(lines)


violations = common.violations


def __getattr__(name: str):
    """The causes live in :mod:`kafkasim.spark_jobs.causes`; ``ordering.cause_text`` etc. still work."""
    from kafkasim.spark_jobs import causes
    if name in causes.__all__:
        return getattr(causes, name)
    raise AttributeError(name)


def run(args, spark=None) -> int:
    data_dir = common.data_dir_of(args)
    topics = common.check_inputs(data_dir, args.topic)       # before the JVM starts
    spark = common.open_spark(args, spark, input_bytes=common.input_bytes(data_dir, topics))
    with values.task_errors():
        return common.run_job(args, lambda: build_report(
            spark, data_dir, topics, sequence=args.sequence, partitioner=args.partitioner,
            corrupt=args.corrupt, max_details=args.max_details,
            min_records_per_partition=args.min_records_per_partition, value_format=args.value_format),
            text, violations)


def main(argv: Optional[Sequence[str]] = None, spark=None) -> int:
    p = common.job_parser("ordering", "Audit per-key partition stability, send order and partitioner.",
                          "spark-submit spark_jobs/ordering.py --data-dir ./kafkasim-data --json ordering.json")
    options.ordering(p)
    return run(p.parse_args(argv), spark)


if __name__ == "__main__":
    sys.exit(main())
