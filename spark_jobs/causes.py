"""Causes of ordering violations: what the ordering audit's findings point at.

:func:`causes_of` groups the violations of :mod:`kafkasim.spark_jobs.ordering` by cause:

- ``partition_count_change``: the topic's partition count grew. Where the topic's metadata
  holds a ``partition_history`` (kept by the broker since it records it,
  :mod:`kafkasim.storage.partition_history`), the change and, per partition, the offset
  where it took effect come from there (``source: "metadata"``): each old partition's log
  end offset at the change, 0 for each new partition. For older data dirs they are
  inferred from the data (``source: "inferred"``, ``ordering.partition_count_history``):
  per partition, the first offset holding a keyed record that follows the new count's
  mapping and not the old one's. Either way, how many key moves the change explains;
- ``producer_partitioner``: a producer (producer id and client id) whose keyed records
  the expected partitioner does not place; every candidate of :data:`CANDIDATES` is
  tried on it and those placing all of its records are named (else the best one);
- ``retries_without_idempotence``: a producer without a producer id (``enable.idempotence``
  off: its batches carry producer id -1) whose records were written twice (``duplicate``)
  or out of send order (``sequence_inversion``): the broker cannot deduplicate or order
  retries it cannot identify. Idempotent producers' findings are not attributed to it;
- ``concurrent_delivery``: per output topic, the ``input_order_inversion`` findings whose
  records carry the ``kafkasim-delivery-count`` header, which only a share-group consumer
  (KIP-932) writes: the members of a share group acquire records of one partition
  concurrently and finish them in any order, and a released record comes back after later
  ones (``redelivered``: how many of the inverted records had a delivery count above 1).
  This is distinct from ``partition_count_change``: a key whose *input partition* changed
  is not an input-order inversion (there is no order across partitions to keep).

Pure transforms over the audit's one scan (``scan.Scan``: its key rows and the records
the sequence checks read); thread-safe (no shared state).
"""

from __future__ import annotations

from typing import Optional, Sequence

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

from kafkasim.spark_jobs import common
from kafkasim.spark_jobs.ordering import (_count_arrays, input_order_inversions, key_moves,
                                          partition_count_history, sequence_violations, with_sequence)

__all__ = ["CANDIDATES", "java_hashcode_partitions", "explained_by", "producer_partitioners",
           "partition_count_changes", "recorded_changes", "moves_explained_by_change", "retries_without_idempotence",
           "concurrent_delivery", "causes_of", "cause_text"]


CANDIDATES = ("murmur2", "consistent_random", "consistent", "murmur2_random", "fnv1a", "murmur3",
              "java_hashcode")
"""Partitioners tried on a producer whose records mismatch: the named ones of
``kafkasim.partitioning.partitioners`` plus ``java_hashcode``, the hand-written Java
``Math.abs(new String(key, UTF_8).hashCode()) % n``."""


def java_hashcode_partitions(keys: Sequence[Optional[bytes]], n: int):
    """``Math.abs(new String(key, UTF_8).hashCode()) % n`` per key (int32 numpy array); -1 for
    a null key, a key that is not UTF-8, or a hash of ``Integer.MIN_VALUE`` (Java would
    return a negative partition and the send would fail).

    >>> java_hashcode_partitions([b"a", b"hello", None], 10**9).tolist()   # Java's hashCode values
    [97, 99162322, -1]
    """
    import numpy as np
    out = np.full(len(keys), -1, dtype=np.int32)
    for i, k in enumerate(keys):      # only over the records of producers that mismatch
        if k is None:
            continue
        try:
            units = k.decode("utf-8").encode("utf-16-be")
        except UnicodeDecodeError:
            continue
        h = 0
        for j in range(0, len(units), 2):
            h = (31 * h + (units[j] << 8 | units[j + 1])) & 0xFFFFFFFF
        if h == 0x80000000:
            continue
        h = h - (1 << 32) if h & 0x80000000 else h
        out[i] = abs(h) % n
    return out


def explained_by(df: DataFrame, counts_col: str, candidates: Sequence[str] = CANDIDATES) -> DataFrame:
    """Append one boolean column ``by_<name>`` per candidate: does it put the record's ``key``
    in its ``partition`` under any count of the ``array<int>`` column ``counts_col``?"""
    import pyarrow as pa
    from pyspark.sql.types import BooleanType, StructField, StructType

    names = list(candidates)
    schema = StructType(df.schema.fields + [StructField("by_" + c, BooleanType()) for c in names])

    def run(batches):
        import numpy as np
        from kafkasim.partitioning.partitioners import partition_many
        for batch in batches:
            keys = batch.column("key")
            parts = batch.column("partition").to_numpy(zero_copy_only=False)
            counts = batch.column(counts_col).to_pylist()
            distinct = sorted({c for cs in counts for c in (cs or ())})
            pykeys = keys.to_pylist() if "java_hashcode" in names else None
            for name in names:
                ok = np.zeros(len(parts), dtype=bool)
                for c in distinct:
                    has = np.array([c in (cs or ()) for cs in counts], dtype=bool)
                    got = (java_hashcode_partitions(pykeys, c) if name == "java_hashcode"
                           else partition_many(keys, c, partitioner=name))
                    ok |= has & (got == parts)
                batch = batch.append_column("by_" + name, pa.array(ok, pa.bool_()))
            yield batch

    return df.mapInArrow(run, schema)


def producer_partitioners(df: DataFrame, history: DataFrame, current_counts: dict[str, int],
                          partitioner: str = "murmur2", candidates: Sequence[str] = CANDIDATES) -> DataFrame:
    """Per (topic, producer_id, client_id) with a record ``partitioner`` does not explain:
    ``records`` (keyed), ``mismatches``, and ``explained_<name>`` = how many of its keyed
    records each candidate explains under a plausible count. ``df``: a scan's key rows
    (``scan.Scan.firsts``: one row per (topic, partition, key, producer_id, client_id) with
    its ``records``; ``client_id`` is the ``kafkasim.producer`` header, ``producer_id`` the
    batch's, null when < 0)."""
    names = list(dict.fromkeys([partitioner, *candidates]))
    keyed = (df.where(F.col("key").isNotNull())
             .select("topic", "partition", "key", "producer_id", "client_id", "records")
             .join(F.broadcast(_count_arrays(df, history, current_counts)), "topic"))
    by = explained_by(keyed, "counts", names)
    n = lambda cond: F.coalesce(F.sum(F.when(cond, F.col("records"))), F.lit(0)).cast("long")  # noqa: E731
    agg = by.groupBy("topic", "producer_id", "client_id").agg(
        F.sum("records").cast("long").alias("records"),
        n(~F.col("by_" + partitioner)).alias("mismatches"),
        *[n(F.col("by_" + c)).alias("explained_" + c) for c in names])
    return agg.where(F.col("mismatches") > 0)


def partition_count_changes(df: DataFrame, history: DataFrame, partitioner: str = "murmur2",
                            exclude: Sequence[tuple] = ()) -> DataFrame:
    """``(topic, from_count, to_count, partition, offset, timestamp)``: for each inferred
    change of a topic's partition count (consecutive plausible counts), per partition the
    first offset holding a keyed record that follows the new count's mapping and not the
    old one's — where the change took effect in that partition. Records of the producers
    in ``exclude`` (``(topic, producer_id, client_id)``: those using another partitioner)
    are left out: their partitions say nothing about the count. ``df``: a scan's key rows
    (``scan.Scan.firsts``: ``min_offset``/``min_offset_ts`` of each group)."""
    w = Window.partitionBy("topic").orderBy("partition_count")
    changes = (history.withColumn("from_count", F.lag("partition_count").over(w))
               .where(F.col("from_count").isNotNull())
               .select("topic", "from_count", F.col("partition_count").alias("to_count"),
                       F.array("from_count", "partition_count").alias("_counts")))
    keyed = (df.where(F.col("key").isNotNull())
             .select("topic", "partition", F.col("min_offset").alias("offset"),
                     F.col("min_offset_ts").alias("timestamp"), "key",
                     F.col("producer_id").alias("_pid"), F.col("client_id").alias("_cid")))
    if exclude:
        ex = df.sparkSession.createDataFrame(list(exclude), "x_topic string, x_pid long, x_cid string")
        keyed = keyed.join(F.broadcast(ex), (F.col("topic") == F.col("x_topic"))
                           & F.col("_pid").eqNullSafe(F.col("x_pid")) & F.col("_cid").eqNullSafe(F.col("x_cid")),
                           "left_anti")
    keyed = keyed.drop("_pid", "_cid").join(F.broadcast(changes), "topic")
    hashed = common.partition_for_keys(keyed, "_counts", partitioner)
    return (hashed.where((F.col("expected")[1] == F.col("partition")) & (F.col("expected")[0] != F.col("partition")))
            .groupBy("topic", "from_count", "to_count", "partition")
            .agg(F.min_by(F.struct("offset", "timestamp"), "offset").alias("m"))
            .select("topic", "from_count", "to_count", "partition", "m.offset", "m.timestamp"))


def recorded_changes(recorded: dict[str, list[dict]]) -> dict[tuple[str, int, int], list[dict]]:
    """``(topic, from_count, to_count) → [{partition, offset, timestamp}]`` of every change of
    the recorded histories: each old partition at its log end offset at the change, each
    new one at 0; ``timestamp`` is the broker's time of the change.

    >>> recorded_changes({"t": [{"from_partitions": 2, "to_partitions": 3, "time_ms": 9,
    ...                          "log_end_offsets": [5, 7]}]})[("t", 2, 3)]     # doctest: +NORMALIZE_WHITESPACE
    [{'partition': 0, 'offset': 5, 'timestamp': 9}, {'partition': 1, 'offset': 7, 'timestamp': 9},
     {'partition': 2, 'offset': 0, 'timestamp': 9}]
    """
    out: dict[tuple[str, int, int], list[dict]] = {}
    for topic, history in sorted(recorded.items()):
        for e in history:
            ends = list(e["log_end_offsets"]) + [0] * (e["to_partitions"] - e["from_partitions"])
            out[(topic, e["from_partitions"], e["to_partitions"])] = [
                {"partition": p, "offset": int(o), "timestamp": int(e["time_ms"])} for p, o in enumerate(ends)]
    return out


def moves_explained_by_change(moves: DataFrame, changes: Sequence[tuple[str, int, int]],
                              partitioner: str = "murmur2") -> DataFrame:
    """``(topic, from_count, to_count, moves, keys)``: the key moves (``key_in_multiple_partitions``
    details) from the key's partition under ``from_count`` to its partition under ``to_count``."""
    ch = moves.sparkSession.createDataFrame([(t, a, b) for t, a, b in changes] or [("", 1, 1)],
                                            "topic string, from_count int, to_count int")
    m = (moves.select("topic", "key", "partition", "other_partition").join(F.broadcast(ch), "topic")
         .withColumn("_counts", F.array("from_count", "to_count")))
    hashed = common.partition_for_keys(m, "_counts", partitioner)
    return (hashed.where((F.col("expected")[0] == F.col("other_partition"))
                         & (F.col("expected")[1] == F.col("partition")))
            .groupBy("topic", "from_count", "to_count")
            .agg(F.count(F.lit(1)).alias("moves"), F.count_distinct("key").alias("keys")))


def retries_without_idempotence(df: DataFrame, sequence: str = "header", value_format: str = "json") -> DataFrame:
    """``(topic, client_id, duplicate, sequence_inversion, keys)``: per producer whose
    batches carry no producer id (idempotence off), its duplicate and inversion findings
    (``df``: the records the sequence checks read, ``scan.Scan.records``)."""
    seq = with_sequence(df, sequence, value_format)
    found = (sequence_violations(seq).where(F.col("kind").isin("duplicate", "sequence_inversion"))
             .select("kind", "topic", "partition", "offset", "key", "producer"))
    pids = df.select("topic", "partition", "offset", "producer_id")
    joined = found.join(pids, ["topic", "partition", "offset"])
    per = joined.groupBy("topic", "producer").agg(
        F.max("producer_id").alias("_pid"),
        F.count(F.when(F.col("kind") == "duplicate", 1)).alias("duplicate"),
        F.count(F.when(F.col("kind") == "sequence_inversion", 1)).alias("sequence_inversion"),
        F.count_distinct("key").alias("keys"))
    return per.where(F.col("_pid") < 0).select(F.col("topic"), F.col("producer").alias("client_id"),
                                                "duplicate", "sequence_inversion", "keys")


def concurrent_delivery(df: DataFrame) -> DataFrame:
    """``(topic, input_order_inversion, redelivered, keys)``: per output topic, its
    input-order inversions of share-group output (records carrying a delivery count),
    how many of those records had been delivered more than once, and the keys involved
    (``df``: the records the sequence checks read, ``scan.Scan.records``)."""
    inv = input_order_inversions(df).where(F.col("delivery_count").isNotNull())
    return (inv.groupBy("topic").agg(F.count(F.lit(1)).alias("input_order_inversion"),
                                     F.count(F.when(F.col("delivery_count") > 1, 1)).alias("redelivered"),
                                     F.count_distinct("key").alias("keys")))


def causes_of(df: DataFrame, current_counts: dict[str, int], counts: dict[str, int], *,
              partitioner: str = "murmur2", sequence: str = "header",
              recorded: Optional[dict[str, list[dict]]] = None, records: Optional[DataFrame] = None,
              value_format: str = "json") -> list[dict]:
    """The causes the violations point at (see docs/spark-audits.md, "Causes");
    ``recorded``: topic → the ``partition_history`` of its metadata (topics without one
    fall back to inference from the data). ``df``: a scan's key rows (``scan.Scan.firsts``);
    ``records``: the records the sequence checks read (``scan.Scan.records``), their values
    in ``value_format`` (for ``sequence=value:FIELD``)."""
    out: list[dict] = []
    recorded = {t: h for t, h in (recorded or {}).items() if h}
    history = partition_count_history(df, current_counts, recorded)
    producers = []
    if counts.get("partitioner_mismatch"):
        producers = producer_partitioners(df, history, current_counts, partitioner).orderBy(
            "topic", "client_id", "producer_id").collect()
    if counts.get("key_in_multiple_partitions") or counts.get("partitioner_mismatch"):
        exclude = [(r["topic"], r["producer_id"], r["client_id"]) for r in producers]
        by_change: dict[tuple, list] = dict(recorded_changes(recorded))
        source = {k: "metadata" for k in by_change}
        eff = []
        if not current_counts or not set(current_counts) <= set(recorded):
            unrecorded = history.where(~F.col("topic").isin(sorted(recorded)))
            eff = partition_count_changes(df, unrecorded, partitioner, exclude).orderBy(
                "topic", "from_count", "partition").collect()
        for r in eff:
            source[(r["topic"], r["from_count"], r["to_count"])] = "inferred"
            by_change.setdefault((r["topic"], r["from_count"], r["to_count"]), []).append(
                {"partition": r["partition"], "offset": r["offset"], "timestamp": r["timestamp"]})
        explained = {}
        if by_change and counts.get("key_in_multiple_partitions"):
            explained = {(r["topic"], r["from_count"], r["to_count"]): (r["moves"], r["keys"]) for r in
                         moves_explained_by_change(key_moves(df), list(by_change), partitioner).collect()}
        for (t, a, b), parts in sorted(by_change.items()):
            mv, ks = explained.get((t, a, b), (0, 0))
            out.append({"cause": "partition_count_change", "topic": t, "from_partitions": a, "to_partitions": b,
                        "source": source[(t, a, b)], "effective": parts,
                        "explains": {"key_in_multiple_partitions": int(ks), "moves": int(mv)}})
    if producers:
        names = list(dict.fromkeys([partitioner, *CANDIDATES]))
        for r in producers:
            fits = [c for c in names if c != partitioner and r["explained_" + c] == r["records"]]
            best = max((c for c in names if c != partitioner), key=lambda c: r["explained_" + c])
            out.append({"cause": "producer_partitioner", "topic": r["topic"], "producer_id": r["producer_id"],
                        "client_id": r["client_id"], "records": int(r["records"]),
                        "explains": {"partitioner_mismatch": int(r["mismatches"])},
                        "partitioners": fits,
                        "best": None if fits else {"partitioner": best, "records": int(r["explained_" + best])}})
    if (counts.get("duplicate") or counts.get("sequence_inversion")) and records is not None:
        for r in retries_without_idempotence(records, sequence, value_format).orderBy("topic", "client_id").collect():
            out.append({"cause": "retries_without_idempotence", "topic": r["topic"], "client_id": r["client_id"],
                        "producer_id": None, "keys": int(r["keys"]),
                        "explains": {"duplicate": int(r["duplicate"]),
                                     "sequence_inversion": int(r["sequence_inversion"])}})
    if counts.get("input_order_inversion") and records is not None:
        for r in concurrent_delivery(records).orderBy("topic").collect():
            out.append({"cause": "concurrent_delivery", "topic": r["topic"], "keys": int(r["keys"]),
                        "redelivered": int(r["redelivered"]),
                        "explains": {"input_order_inversion": int(r["input_order_inversion"])}})
    return out


def cause_text(c: dict) -> str:
    """One line for a cause of the report."""
    if c["cause"] == "concurrent_delivery":
        return (f"{c['topic']}: concurrent delivery (share group): {c['explains']['input_order_inversion']:,} "
                f"input-order inversion(s) over {c['keys']:,} key(s), {c['redelivered']:,} of them of redelivered "
                f"records; the members of a share group process one partition's records at once, so per-key "
                f"order is not kept (a consumer group keeps it: one owner per partition)")
    if c["cause"] == "partition_count_change":
        eff = ", ".join(f"p{e['partition']}@{e['offset']}" for e in c["effective"])
        how = "recorded by the broker" if c.get("source") == "metadata" else "inferred from the data"
        return (f"{c['topic']}: partition count changed {c['from_partitions']} -> {c['to_partitions']} "
                f"({how}), effective from offset {eff}; explains {c['explains']['key_in_multiple_partitions']} "
                f"moved key(s)")
    if c["cause"] == "retries_without_idempotence":
        e = c["explains"]
        return (f"{c['topic']}: producer client_id={c['client_id']} retried without idempotence "
                f"(no producer id): {e['duplicate']:,} duplicate(s), {e['sequence_inversion']:,} "
                f"sequence inversion(s) over {c['keys']:,} key(s); enable.idempotence=true prevents both")
    who = f"producer client_id={c['client_id']} producer_id={c['producer_id']}"
    if c["partitioners"]:
        what = f"uses {' / '.join(c['partitioners'])} (explains all {c['records']:,} keyed records)"
    elif c.get("best"):
        what = (f"matches no known partitioner (best: {c['best']['partitioner']}, "
                f"{c['best']['records']:,} of {c['records']:,} records)")
    else:
        what = "matches no known partitioner"
    return f"{c['topic']}: {who} {what}; {c['explains']['partitioner_mismatch']:,} mismatch(es)"
