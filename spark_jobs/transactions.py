"""Transactions audit: what read_committed sees, what aborts leave behind, what holds the LSO back.

Run it::

    spark-submit --py-files dist/kafkasim-jobs.zip spark_jobs/transactions.py --data-dir DIR [--topic T]
        [--input-topic I --output-topic O] [--now-ms MS] [--max-transaction-timeout MIN] [--json OUT]

or ``kafkasim audit transactions --data-dir DIR``. Exit code 0 when clean, 3 when a
transaction hangs, an input offset was consumed more than once into committed output, or
batches are corrupt.

The log is read one row per batch (the data source's ``mode=batches``,
:mod:`kafkasim.spark_jobs.batch_headers`: headers only, a control batch's one record decoded),
and ``__transaction_state`` through its codec (:mod:`kafkasim.protocol.txn_log`). Steps:

1. **Fates** (:func:`batch_fates`). A transactional data batch (attributes 0x10) belongs to
   the transaction its producer id ends next in that partition: the first COMMIT/ABORT control
   batch (0x20) of the same producer id at a higher offset — Kafka's rule (the producer state
   and the aborted-transaction index follow the producer id; a fenced epoch's batches are
   ended by the bumped epoch's marker). ``committed``, ``aborted``, or ``open`` when no marker
   follows; a batch without the transactional bit is ``non_transactional``; control batches
   are ``control``.
2. **Partitions** (:func:`partition_summary`): ``last_stable_offset`` = the first offset of
   the earliest open transaction, else the log end offset (Kafka's LSO on a leader whose high
   watermark is its log end, as a single broker's). ``committed_records`` = records of
   committed transactions plus non-transactional records; ``read_committed_records`` = those
   below the LSO: what a read_committed consumer gets from the partition now.
3. **Aborted** (:func:`aborted_transactions`, :func:`aborted_by_producer`): one row per
   aborted transaction and partition (its first/last offset, records, the marker's offset),
   summed per (topic, partition, producer id): records a read_uncommitted consumer gets and a
   read_committed one never does. The report lists at most ``--max-details`` rows and, in
   each, the offsets of at most ``--max-details`` transactions (``transactions`` stays exact).
4. **Open transactions** (:func:`open_transactions`): per (topic, partition, producer id) with
   open batches, the first offset (what holds the LSO back), the transactional id and the
   coordinator's state from ``__transaction_state`` (:func:`transaction_states`), ``open_ms`` =
   now − the timestamp of its first batch there, ``idle_ms`` = now − its last batch's max
   timestamp (the Duration of ``kafka-transactions.sh find-hanging``). "now" is ``--now-ms``,
   else the newest timestamp of the audited topics' batches (``now_source`` says which).
   ``hanging`` when ``open_ms`` passes the limit: ``--max-transaction-timeout`` minutes when
   given, else the ``transaction.timeout.ms`` recorded for the transactional id, else 15
   minutes (the option's default in Kafka). ``coordinator_tracks``: the coordinator's last state for the
   id is Ongoing/PrepareCommit/PrepareAbort, with this producer id, and lists this partition
   — when false the coordinator will never write the marker (Kafka's find-hanging lists
   exactly those).
5. **Exactly once** (:func:`input_refs`, :func:`duplicated_inputs`), with ``--output-topic``:
   each committed output record (a committed transaction's, or a non-transactional one)
   names its input in the header ``kafkasim-input`` = ``"<input partition>:<input offset>"``
   (ASCII); inputs named by more than one committed output record are
   ``input_consumed_twice``. With ``--input-topic`` the named inputs are looked up in it
   (:func:`input_coverage`): committed, not committed (an aborted or open input record), or
   not in the log.

Verdict checks: hanging transactions (0), inputs consumed twice (0, with ``--output-topic``),
corrupt batches (0). There is no sample floor: each finding is a fact. Audited topics without
a transactional batch (and no ``--output-topic``) give ``not enough data``: nothing to judge.

Invariants: transforms are pure and deterministic (rows ordered by topic, partition, offset).
Thread-safety: no shared state. The module is over 500 lines because it is one job, as
ordering.py is: the five steps read the one fates table and feed the one report and its text.
"""

from __future__ import annotations

import sys
from typing import Iterable, Optional, Sequence

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

from kafkasim.protocol.txn_log import (
    TRANSACTION_STATE_TOPIC, TXN_STATE_NAMES, TXN_STATE_ONGOING, TXN_STATE_PREPARE_ABORT, TXN_STATE_PREPARE_COMMIT,
    decode_txn_record)
from kafkasim.records.control import CONTROL_ABORT, CONTROL_COMMIT
from kafkasim.spark_jobs import common, options
from kafkasim.types import INPUT_HEADER

__all__ = ["INPUT_HEADER", "KINDS", "FATES", "STATES_SCHEMA", "DEFAULT_MAX_TRANSACTION_TIMEOUT_MIN",
           "read_batches", "batch_fates", "partition_summary", "aborted_transactions", "aborted_by_producer",
           "transaction_states", "open_transactions", "input_refs", "duplicated_inputs", "input_coverage",
           "report", "build_report", "text", "run", "main"]

KINDS = ("hanging_transaction", "input_consumed_twice")
FATES = ("committed", "aborted", "open", "non_transactional", "control")
DEFAULT_MAX_TRANSACTION_TIMEOUT_MIN = 15
"""``kafka-transactions.sh find-hanging --max-transaction-timeout``'s default (minutes)."""
_TRACKING = (TXN_STATE_NAMES[TXN_STATE_ONGOING], TXN_STATE_NAMES[TXN_STATE_PREPARE_COMMIT],
             TXN_STATE_NAMES[TXN_STATE_PREPARE_ABORT])
STATES_SCHEMA = ("producer_id long, transactional_id string, state string, transaction_timeout_ms int, "
                 "coordinator_producer_id long, coordinator_start_ms long, txn_partitions array<string>")
_NO_STATES = [(-2, None, None, None, None, None, None)]   # an empty DataFrame would need an RDD


def read_batches(spark, data_dir: str, topics: Sequence[str], corrupt: str = "report") -> DataFrame:
    """One row per batch of ``topics`` (``batch_headers.BATCHES_SCHEMA``)."""
    return common.read_log(spark, data_dir, list(topics), corrupt=corrupt, mode="batches")


def batch_fates(batches: DataFrame) -> DataFrame:
    """``batches`` plus ``fate`` (one of :data:`FATES`) and ``marker_offset``, ``marker_epoch``,
    ``marker_timestamp``: the offset, producer epoch and timestamp of the COMMIT/ABORT marker
    that ends a transactional batch (null when open or not transactional).

    The marker is found in one running window per (topic, partition, producer id), in
    descending offset order: the last marker seen so far is the nearest one above.
    """
    marker = F.when(F.col("control") & F.col("control_type").isin(CONTROL_ABORT, CONTROL_COMMIT),
                    F.struct(F.col("base_offset").alias("offset"), F.col("control_type").alias("type"),
                             F.col("producer_epoch").alias("epoch"), F.col("max_timestamp").alias("ts")))
    w = (Window.partitionBy("topic", "partition", "producer_id").orderBy(F.col("base_offset").desc())
         .rowsBetween(Window.unboundedPreceding, Window.currentRow))
    txn = batches.where(F.col("transactional") | F.col("control")) \
                 .withColumn("_end", F.last(marker, ignorenulls=True).over(w))
    fate = (F.when(F.col("control"), F.lit("control"))
            .when(F.col("_end").isNull(), F.lit("open"))
            .when(F.col("_end.type") == CONTROL_COMMIT, F.lit("committed"))
            .otherwise(F.lit("aborted")))
    txn = txn.withColumn("fate", fate)
    for name, field, typ in (("marker_offset", "offset", "long"), ("marker_epoch", "epoch", "int"),
                             ("marker_timestamp", "ts", "long")):
        txn = txn.withColumn(name, F.when(~F.col("control"), F.col("_end." + field)).cast(typ))
    txn = txn.drop("_end")
    plain = batches.where(~(F.col("transactional") | F.col("control"))).withColumn("fate", F.lit("non_transactional"))
    for name, typ in (("marker_offset", "long"), ("marker_epoch", "int"), ("marker_timestamp", "long")):
        plain = plain.withColumn(name, F.lit(None).cast(typ))
    return txn.unionByName(plain)


def _n(cond) -> "F.Column":
    return F.coalesce(F.sum(F.when(cond, F.col("records"))), F.lit(0)).cast("long")


def partition_summary(fates: DataFrame) -> DataFrame:
    """Per (topic, partition): ``log_start_offset``, ``log_end_offset``, ``last_stable_offset``,
    ``committed_records``, ``read_committed_records``, ``transactional_records`` (committed
    ones), ``non_transactional_records``, ``aborted_records``, ``open_records``, ``markers``,
    ``committed_transactions``, ``aborted_transactions``, ``open_transactions``,
    ``newest_timestamp``."""
    fate = F.col("fate")
    first_open = F.min(F.when(fate == "open", F.col("base_offset"))).over(Window.partitionBy("topic", "partition"))
    end = F.max(F.col("last_offset") + 1).over(Window.partitionBy("topic", "partition"))
    f = fates.withColumn("_lso", F.coalesce(first_open, end))
    visible = fate.isin("committed", "non_transactional")
    is_marker = fate == "control"
    return f.groupBy("topic", "partition").agg(
        F.min("base_offset").alias("log_start_offset"),
        (F.max("last_offset") + 1).alias("log_end_offset"),
        F.first("_lso").alias("last_stable_offset"),
        _n(visible).alias("committed_records"),
        _n(visible & (F.col("base_offset") < F.col("_lso"))).alias("read_committed_records"),
        _n(fate == "committed").alias("transactional_records"),
        _n(fate == "non_transactional").alias("non_transactional_records"),
        _n(fate == "aborted").alias("aborted_records"),
        _n(fate == "open").alias("open_records"),
        F.count(F.when(is_marker, 1)).alias("markers"),
        F.count(F.when(is_marker & (F.col("control_type") == CONTROL_COMMIT), 1)).alias("committed_transactions"),
        F.count(F.when(is_marker & (F.col("control_type") == CONTROL_ABORT), 1)).alias("aborted_transactions"),
        F.count_distinct(F.when(fate == "open", F.col("producer_id"))).alias("open_transactions"),
        F.max("max_timestamp").alias("newest_timestamp"))


def aborted_transactions(fates: DataFrame) -> DataFrame:
    """One row per aborted transaction and partition: ``topic, partition, producer_id,
    producer_epoch, first_offset, last_offset, records, batches, marker_offset``."""
    return (fates.where(F.col("fate") == "aborted")
            .groupBy("topic", "partition", "producer_id", "marker_offset")
            .agg(F.max("producer_epoch").alias("producer_epoch"), F.min("base_offset").alias("first_offset"),
                 F.max("last_offset").alias("last_offset"), F.sum("records").cast("long").alias("records"),
                 F.count(F.lit(1)).alias("batches"))
            .select("topic", "partition", "producer_id", "producer_epoch", "first_offset", "last_offset",
                    "records", "batches", "marker_offset"))


def aborted_by_producer(aborted: DataFrame, max_offsets: Optional[int] = None) -> DataFrame:
    """Per (topic, partition, producer_id) of :func:`aborted_transactions`: ``transactions``,
    ``records``, and ``offsets`` (each transaction's ``[first_offset, last_offset]``, in order;
    the first ``max_offsets`` of them when given)."""
    offsets = F.sort_array(F.collect_list(F.array("first_offset", "last_offset")))
    if max_offsets is not None:
        offsets = F.slice(offsets, 1, max(int(max_offsets), 0))
    return (aborted.groupBy("topic", "partition", "producer_id")
            .agg(F.count(F.lit(1)).alias("transactions"), F.sum("records").cast("long").alias("records"),
                 offsets.alias("offsets")))


def transaction_states(records: Iterable[tuple]) -> list[tuple]:
    """Rows of :data:`STATES_SCHEMA` from ``__transaction_state`` records ``(partition, offset,
    key, value)``: one per producer id any record of a transactional id carried (its
    ``producer_id`` and, when set, ``previous_producer_id``), with that id's **last** record's
    state, timeout, producer id, start time and partitions (``"topic-partition"``). A
    transactional id whose last record is a tombstone (expired) has a null state. Records of a
    key version Kafka does not know are skipped, as Kafka does.

    >>> from kafkasim.protocol.txn_log import encode_txn_key, encode_txn_value, TxnLogValue
    >>> v = TxnLogValue(7, 0, 60000, 1, (("t", (0,)),), 5, 5)
    >>> transaction_states([(0, 0, encode_txn_key("tx"), encode_txn_value(v))])
    [(7, 'tx', 'Ongoing', 60000, 7, 5, ['t-0'])]
    """
    last: dict[str, tuple] = {}
    pids: dict[int, str] = {}
    for _p, _o, key, value in sorted(records, key=lambda r: (r[0], r[1])):
        rec = decode_txn_record(key, value)
        tid = rec.key.transactional_id
        if tid is None:
            continue
        last[tid] = rec.value
        if rec.value is not None:
            pids[rec.value.producer_id] = tid
            if rec.value.previous_producer_id >= 0:
                pids.setdefault(rec.value.previous_producer_id, tid)
    out = []
    for pid, tid in sorted(pids.items()):
        v = last[tid]
        if v is None:
            out.append((pid, tid, None, None, None, None, None))
            continue
        parts = sorted(f"{t}-{p}" for t, ps in (v.transaction_partitions or ()) for p in ps)
        out.append((pid, tid, v.state_name, v.transaction_timeout_ms, v.producer_id,
                    v.transaction_start_timestamp_ms, parts))
    return out


def open_transactions(fates: DataFrame, states: DataFrame, now_ms: int,
                      max_transaction_timeout_ms: Optional[int] = None,
                      default_timeout_ms: int = DEFAULT_MAX_TRANSACTION_TIMEOUT_MIN * 60_000) -> DataFrame:
    """Per (topic, partition, producer_id) with open batches: ``producer_epoch``,
    ``first_offset``, ``last_offset``, ``records``, ``first_timestamp``, ``last_timestamp``,
    the coordinator's view (``transactional_id``, ``state``, ``transaction_timeout_ms``,
    ``coordinator_start_ms``, ``coordinator_tracks``), ``open_ms``, ``idle_ms``, ``limit_ms``
    and ``hanging`` (see step 4 of the module docstring). ``states``: :data:`STATES_SCHEMA`."""
    o = (fates.where(F.col("fate") == "open").groupBy("topic", "partition", "producer_id")
         .agg(F.max("producer_epoch").alias("producer_epoch"), F.min("base_offset").alias("first_offset"),
              F.max("last_offset").alias("last_offset"), F.sum("records").cast("long").alias("records"),
              F.min("first_timestamp").alias("first_timestamp"), F.max("max_timestamp").alias("last_timestamp")))
    j = o.join(F.broadcast(states), "producer_id", "left")
    limit = (F.lit(int(max_transaction_timeout_ms)) if max_transaction_timeout_ms is not None
             else F.coalesce(F.col("transaction_timeout_ms").cast("long"), F.lit(int(default_timeout_ms))))
    tp = F.concat(F.col("topic"), F.lit("-"), F.col("partition").cast("string"))
    tracks = (F.col("state").isin(*_TRACKING) & (F.col("coordinator_producer_id") == F.col("producer_id"))
              & F.coalesce(F.array_contains("txn_partitions", tp), F.lit(False)))
    return j.select(
        "topic", "partition", "producer_id", "producer_epoch", "first_offset", "last_offset", "records",
        "first_timestamp", "last_timestamp", "transactional_id", "state", "transaction_timeout_ms",
        "coordinator_start_ms", F.coalesce(tracks, F.lit(False)).alias("coordinator_tracks"),
        (F.lit(int(now_ms)) - F.col("first_timestamp")).alias("open_ms"),
        (F.lit(int(now_ms)) - F.col("last_timestamp")).alias("idle_ms"),
        limit.cast("long").alias("limit_ms"),
        ((F.lit(int(now_ms)) - F.col("first_timestamp")) > limit).alias("hanging"))


def input_refs(out_records: DataFrame, fates: DataFrame, header: str = INPUT_HEADER) -> DataFrame:
    """The committed records of the output (``out_records``: ``topic, partition, offset,
    headers, batch_base_offset``) with the input they name: ``in_partition``, ``in_offset``
    (null when the header is missing or not ``"<int>:<int>"``), ``has_header``, and the
    transaction that holds them (``txn``: producer id, and the epoch and timestamp of the
    markers that ended it — the coordinator writes one transaction's markers at one time, so
    they name it across partitions; a non-transactional record is its own)."""
    batches = fates.where(F.col("fate").isin("committed", "non_transactional")).select(
        "topic", "partition", F.col("base_offset").alias("batch_base_offset"), "producer_id", "marker_epoch",
        "marker_timestamp")
    ref = common.header_value(header).cast("string")
    parts = F.split(ref, ":")
    ok = F.size(parts) == 2
    p = F.when(ok, F.get(parts, 0).try_cast("int"))
    o = F.when(ok, F.get(parts, 1).try_cast("bigint"))
    return (out_records.join(batches, ["topic", "partition", "batch_base_offset"])
            .select("topic", "partition", "offset", ref.isNotNull().alias("has_header"),
                    F.when(p.isNotNull() & o.isNotNull(), p).alias("in_partition"),
                    F.when(p.isNotNull() & o.isNotNull(), o).alias("in_offset"),
                    F.struct("producer_id", F.coalesce("marker_epoch", "partition").alias("epoch"),
                             F.coalesce("marker_timestamp", -F.col("offset") - 1).alias("end")).alias("txn")))


def duplicated_inputs(refs: DataFrame) -> DataFrame:
    """Per input (``in_partition``, ``in_offset``) named by more than one committed output
    record: ``records`` (copies), ``transactions`` (distinct transactions holding them) and
    ``outputs`` (their ``[partition, offset]``, in order)."""
    return (refs.where(F.col("in_offset").isNotNull()).groupBy("in_partition", "in_offset")
            .agg(F.count(F.lit(1)).alias("records"), F.count_distinct("txn").alias("transactions"),
                 F.sort_array(F.collect_list(F.array(F.col("partition").cast("long"), "offset"))).alias("outputs"))
            .where(F.col("records") > 1))


def input_coverage(refs: DataFrame, input_fates: DataFrame) -> DataFrame:
    """One row: of the distinct inputs the committed output names, how many are committed
    records of the input topic (``inputs_committed``), records it has but not committed
    (``inputs_not_committed``: aborted or open), or offsets it does not hold (``inputs_not_found``);
    and ``input_committed_records``, the committed records of the input topic."""
    named = refs.where(F.col("in_offset").isNotNull()).select("in_partition", "in_offset").distinct()
    data = input_fates.where(F.col("fate") != "control").select(
        F.col("partition").alias("_p"), "base_offset", "last_offset", "fate")
    m = named.join(data, (named.in_partition == data._p) & (named.in_offset >= data.base_offset)
                   & (named.in_offset <= data.last_offset), "left")
    committed = F.col("fate").isin("committed", "non_transactional")
    found = m.agg(F.count(F.when(committed, 1)).alias("inputs_committed"),
                  F.count(F.when(F.col("fate").isNotNull() & ~committed, 1)).alias("inputs_not_committed"),
                  F.count(F.when(F.col("fate").isNull(), 1)).alias("inputs_not_found"))
    total = input_fates.agg(_n(F.col("fate").isin("committed", "non_transactional"))
                            .alias("input_committed_records"))
    return found.crossJoin(total)


# -- the report ---------------------------------------------------------------------------
def _causes(open_rows: list[dict], dups: Optional[dict]) -> list[dict]:
    out: list[dict] = []
    by: dict[tuple, list] = {}
    for r in open_rows:
        if r["hanging"]:
            by.setdefault((r["coordinator_tracks"], r.get("transactional_id"), r["producer_id"]), []).append(r)
    for (tracks, tid, pid), rows in sorted(by.items(), key=lambda kv: (kv[0][1] or "", kv[0][2], kv[0][0])):
        out.append({"cause": "transaction_timeout_not_enforced" if tracks else "coordinator_lost_transaction",
                    "transactional_id": tid, "producer_id": pid,
                    "partitions": [f"{r['topic']}-{r['partition']}@{r['first_offset']}" for r in rows],
                    "explains": {"hanging_transaction": len(rows)}})
    if dups and dups["duplicated_inputs"]:
        across, within = dups["across_transactions"], dups["duplicated_inputs"] - dups["across_transactions"]
        if across:
            out.append({"cause": "input_reprocessed_across_transactions", "explains": {"input_consumed_twice": across}})
        if within:
            out.append({"cause": "input_emitted_twice_in_one_transaction",
                        "explains": {"input_consumed_twice": within}})
    return out


def cause_text(c: dict) -> str:
    n = next(iter(c["explains"].values()))
    if c["cause"] == "coordinator_lost_transaction":
        who = f"transactional id {c['transactional_id']!r}" if c["transactional_id"] else "no transactional id"
        return (f"producer id {c['producer_id']} ({who}): the coordinator no longer tracks its open transaction in "
                f"{', '.join(c['partitions'])}; no marker will come (kafka-transactions.sh abort ends it)")
    if c["cause"] == "transaction_timeout_not_enforced":
        return (f"transactional id {c['transactional_id']!r} (producer id {c['producer_id']}): still Ongoing past its "
                f"timeout in {', '.join(c['partitions'])}; the coordinator has not aborted it (broker down?)")
    if c["cause"] == "input_reprocessed_across_transactions":
        return (f"{n:,} input(s) in more than one committed transaction: consumed offsets not committed with "
                f"the output (send_offsets_to_transaction), or output written outside a transaction")
    return f"{n:,} input(s) emitted more than once inside one transaction: the transform itself duplicates"


def report(partitions: list[dict], aborted: list[dict], open_rows: list[dict], *, now_ms: Optional[int],
           now_source: str, eos: Optional[dict] = None, corruption: Sequence[dict] = (),
           max_details: Optional[int] = None, aborted_rows: Optional[int] = None) -> dict:
    """The JSON report (schema in docs/spark-audits.md) from the collected transform outputs:
    ``partitions`` (:func:`partition_summary` rows), ``aborted`` (:func:`aborted_by_producer`
    rows), ``open_rows`` (:func:`open_transactions` rows), ``eos`` (the exactly-once figures,
    with its ``details``: :func:`duplicated_inputs` rows), ``aborted_rows``: how many aborted
    rows there are in all (default ``len(aborted)``)."""
    hanging = sum(1 for r in open_rows if r["hanging"])
    v = {"hanging_transaction": hanging, "input_consumed_twice": int(eos["duplicated_inputs"]) if eos else 0}
    checks = [common.check("hanging transactions", 0, hanging)]
    if eos is not None:
        checks.append(common.check("inputs consumed more than once", 0, v["input_consumed_twice"]))
    checks.append(common.check("corrupt batches", 0, len(corruption)))
    total = lambda k: sum(int(p[k]) for p in partitions)  # noqa: E731
    rep = {
        "now_ms": now_ms, "now_source": now_source,
        "totals": {k: total(k) for k in ("committed_records", "read_committed_records", "aborted_records",
                                         "open_records", "committed_transactions", "aborted_transactions")},
        "partitions": partitions,
        "aborted": aborted,
        "aborted_truncated": (aborted_rows if aborted_rows is not None else len(aborted)) > len(aborted),
        "open_transactions": open_rows,
        "exactly_once": eos,
        "violations": v,
        "details_truncated": bool(max_details is not None and eos and eos["duplicated_inputs"] > len(eos["details"])),
        "corrupt_batches": list(corruption),
        "checks": checks,
        "causes": _causes(open_rows, eos),
    }
    rep.update(common.verdict_of(checks, facts=hanging + v["input_consumed_twice"] + len(corruption)))
    if eos is None and not corruption and not any(p["markers"] or p["open_records"] for p in partitions):
        rep["verdict"] = common.VERDICT_NOT_ENOUGH_DATA     # no transactional batch: nothing to judge
        rep["no_transactions"] = True
    return rep


def _rows(df: DataFrame, order: Sequence[str], limit: Optional[int] = None) -> list[dict]:
    q = df.orderBy(*order)
    return [r.asDict(recursive=True) for r in (q.limit(limit) if limit is not None else q).collect()]


def _states(spark, data_dir: str, corrupt: str) -> DataFrame:
    """:data:`STATES_SCHEMA` rows of the data dir's ``__transaction_state`` (none without it)."""
    rows: list = []
    if TRANSACTION_STATE_TOPIC in common.topic_partition_counts(data_dir):
        recs = common.read_log(spark, data_dir, [TRANSACTION_STATE_TOPIC], corrupt=corrupt,
                               columns=["partition", "offset", "key", "value"]).collect()
        rows = transaction_states((r["partition"], r["offset"], r["key"], r["value"]) for r in recs)
    return spark.createDataFrame(rows or _NO_STATES, STATES_SCHEMA)


def build_report(spark, data_dir: str, topics: list[str], *, input_topic: Optional[str] = None,
                 output_topic: Optional[str] = None, now_ms: Optional[int] = None,
                 max_transaction_timeout_min: Optional[int] = None, corrupt: str = "report",
                 max_details: int = 1000, corruption: Optional[list] = None) -> dict:
    """Read → transform → collect: the transactions report for ``topics`` (plus the input and
    output topics) under ``data_dir``; ``corruption``: the corrupt batches, when the caller has them."""
    from pyspark import StorageLevel
    scanned = sorted(set(topics) | {t for t in (input_topic, output_topic) if t})
    topics = scanned
    fates = batch_fates(read_batches(spark, data_dir, scanned, corrupt))
    try:
        parts = _rows(partition_summary(fates), ["topic", "partition"])
        if output_topic or any(p["aborted_records"] or p["open_records"] for p in parts):
            fates = fates.persist(StorageLevel.MEMORY_AND_DISK)     # more queries follow; none on a log without
        source = "--now-ms"
        if now_ms is None:
            source = "newest timestamp in the log"
            now_ms = max((p["newest_timestamp"] for p in parts if p["newest_timestamp"] is not None), default=None)
        aborted, aborted_rows, open_rows = [], 0, []
        if any(p["aborted_records"] for p in parts):       # no query for what the summary says is not there
            ab = aborted_by_producer(aborted_transactions(fates), max_details)
            aborted_rows = ab.count()
            aborted = _rows(ab, ["topic", "partition", "producer_id"], max_details)
        if any(p["open_records"] for p in parts):
            limit = None if max_transaction_timeout_min is None else max_transaction_timeout_min * 60_000
            open_rows = _rows(open_transactions(fates, _states(spark, data_dir, corrupt), now_ms, limit),
                              ["topic", "partition", "first_offset"])
        eos = None
        if output_topic:
            recs = common.read_log(spark, data_dir, [output_topic], corrupt=corrupt,
                                   columns=["topic", "partition", "offset", "headers", "batch_base_offset"])
            refs = input_refs(recs, fates.where(F.col("topic") == output_topic)).persist(StorageLevel.MEMORY_AND_DISK)
            tally = refs.agg(F.count(F.lit(1)).alias("committed_output_records"),
                             F.count(F.when(F.col("in_offset").isNotNull(), 1)).alias("labelled"),
                             F.count(F.when(~F.col("has_header"), 1)).alias("without_header"),
                             F.count(F.when(F.col("has_header") & F.col("in_offset").isNull(), 1))
                             .alias("malformed_header")).first().asDict()
            dups = duplicated_inputs(refs)
            d = dups.agg(F.count(F.lit(1)).alias("n"), F.coalesce(F.sum(F.col("records") - 1), F.lit(0)).alias("extra"),
                         F.count(F.when(F.col("transactions") > 1, 1)).alias("across")).first()
            eos = {"input_topic": input_topic, "output_topic": output_topic, "header": INPUT_HEADER,
                   **{k: int(x) for k, x in tally.items()},
                   "duplicated_inputs": int(d["n"]), "duplicate_records": int(d["extra"]),
                   "across_transactions": int(d["across"]),
                   "details": _rows(dups, ["in_partition", "in_offset"], max_details)}
            if input_topic:
                cov = input_coverage(refs, fates.where(F.col("topic") == input_topic)).first().asDict()
                eos.update({k: int(x) for k, x in cov.items()})
                eos["inputs_without_output"] = max(0, eos["input_committed_records"] - eos["inputs_committed"])
            refs.unpersist()
    finally:
        fates.unpersist()
    if corruption is None:
        corruption = common.corruption_of(spark, data_dir, scanned)
    rep = report(parts, aborted, open_rows, now_ms=now_ms, now_source=source, eos=eos, corruption=corruption,
                 max_details=max_details, aborted_rows=aborted_rows)
    rep["topics"] = scanned
    return rep


def text(rep: dict) -> str:
    t = rep["totals"]
    lines = [f"transactions audit: {t['committed_transactions']:,} committed and {t['aborted_transactions']:,} "
             f"aborted transaction markers; now = {rep['now_ms']} ({rep['now_source']})",
             f"  {'partition':24} {'LSO':>8} {'end':>8} {'committed':>10} {'read_committed':>14} "
             f"{'aborted':>8} {'open':>6}"]
    for p in rep["partitions"]:
        lines.append(f"  {p['topic'] + '-' + str(p['partition']):24} {p['last_stable_offset']:>8,} "
                     f"{p['log_end_offset']:>8,} {p['committed_records']:>10,} {p['read_committed_records']:>14,} "
                     f"{p['aborted_records']:>8,} {p['open_records']:>6,}")
    for a in rep["aborted"][:20]:
        offs = ", ".join(f"{x}..{y}" for x, y in a["offsets"][:5]) + (" ..." if len(a["offsets"]) > 5 else "")
        lines.append(f"  aborted: {a['topic']}-{a['partition']} producer id {a['producer_id']}: {a['records']:,} "
                     f"record(s) in {a['transactions']:,} transaction(s) at {offs} (read_uncommitted sees them)")
    for o in rep["open_transactions"]:
        lines.append(f"  {'HANGING' if o['hanging'] else 'open'}: {o['topic']}-{o['partition']} from offset "
                     f"{o['first_offset']:,} producer id {o['producer_id']} transactional id {o['transactional_id']!r} "
                     f"({o['state'] or 'unknown to the coordinator'}) open {o['open_ms'] / 1000:,.1f} s, idle "
                     f"{o['idle_ms'] / 1000:,.1f} s, limit {o['limit_ms'] / 1000:,.1f} s")
    e = rep["exactly_once"]
    if e:
        lines.append(f"  exactly once {e['input_topic'] or '?'} -> {e['output_topic']}: "
                     f"{e['committed_output_records']:,} committed output record(s), {e['labelled']:,} naming an input; {e['duplicated_inputs']:,} "
                     f"input(s) consumed more than once ({e['duplicate_records']:,} extra record(s))")
        if "inputs_committed" in e:
            lines.append(f"    inputs: {e['inputs_committed']:,} committed, {e['inputs_not_committed']:,} not "
                         f"committed, {e['inputs_not_found']:,} not found; {e['inputs_without_output']:,} committed "
                         f"input record(s) without output")
        for d in e["details"][:20]:
            lines.append(f"    input {d['in_partition']}:{d['in_offset']} -> {d['records']} outputs "
                         f"{', '.join(f'{p}:{o}' for p, o in d['outputs'])}")
    if rep["corrupt_batches"]:
        lines.append(f"  corrupt batches skipped {len(rep['corrupt_batches']):,}")
    for c in rep["causes"]:
        lines.append("  cause: " + cause_text(c))
    lines += common.checks_text(rep)
    lines.append({common.VERDICT_OK: "  OK: no hanging transaction, no input consumed twice",
                  common.VERDICT_FAILED: "  VIOLATIONS FOUND"}.get(
        rep["verdict"], "  no transactional batch in the audited topics: nothing to judge"
        if rep.get("no_transactions") else "  verdict: not enough data"))
    return "\n".join(lines)


violations = common.violations


def check_args(args, data_dir: str) -> list[str]:
    """The audited topics (``--topic``, or every non-internal one, plus the input and output
    topics), after checking the options (before the JVM starts)."""
    topics = common.check_inputs(data_dir, args.topic)
    common.require(args.input_topic is None or args.output_topic is not None,
                   f"--input-topic {args.input_topic} needs --output-topic (the topic whose records name the inputs)")
    common.default_topics(data_dir, [t for t in (args.input_topic, args.output_topic) if t] or None)
    common.require(args.now_ms is None or args.now_ms >= 0, f"--now-ms must be >= 0, got {args.now_ms}")
    common.require(args.max_transaction_timeout is None or args.max_transaction_timeout >= 0,
                   f"--max-transaction-timeout must be >= 0 minutes, got {args.max_transaction_timeout}")
    common.require(args.max_details >= 0, f"--max-details must be >= 0, got {args.max_details}")
    return sorted(set(topics) | {t for t in (args.input_topic, args.output_topic) if t})


def run(args, spark=None) -> int:
    data_dir = common.data_dir_of(args)
    topics = check_args(args, data_dir)
    spark = common.open_spark(args, spark, input_bytes=common.input_bytes(data_dir, topics))
    return common.run_job(args, lambda: build_report(
        spark, data_dir, topics, input_topic=args.input_topic, output_topic=args.output_topic, now_ms=args.now_ms,
        max_transaction_timeout_min=args.max_transaction_timeout, corrupt=args.corrupt,
        max_details=args.max_details), text, violations)


def main(argv: Optional[Sequence[str]] = None, spark=None) -> int:
    p = common.job_parser("transactions", "Audit transactions: read_committed view, aborted records, "
                          "hanging transactions, inputs consumed twice.",
                          "spark-submit spark_jobs/transactions.py --data-dir ./kafkasim-data "
                          "--input-topic orders --output-topic totals --json txn.json")
    options.transactions(p)
    return run(p.parse_args(argv), spark)


if __name__ == "__main__":
    sys.exit(main())
