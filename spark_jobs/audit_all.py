"""``kafkasim audit all``: the ordering, skew, lag and transactions audits in one Spark session.

Run it::

    spark-submit --py-files dist/kafkasim-jobs.zip spark_jobs/audit_all.py --data-dir DIR [--topic T] [--json OUT] [--plot-dir DIR]

or ``kafkasim audit all --data-dir DIR``. Steps (each a phase of the terminal progress):

1. check the arguments, the data dir and the topics (before the JVM starts);
2. start Spark, with ``spark.sql.shuffle.partitions`` sized to the input
   (:func:`kafkasim.spark_jobs.common.shuffle_partitions_for`) when this process starts the session;
3. read the committed offsets (``__consumer_offsets``), then scan the audited topics once
   (``scan.Scan``: the data source's ``mode=partials`` with every figure the three audits
   need — key rows, time windows, the sequenced records, the lag look-ups of the commits),
   persisted, and scan them plus ``__consumer_offsets`` for corrupt batches;
4. run ordering, skew and lag over that one scan (each its ``build_report`` with
   ``scan=`` and ``corruption=``), and transactions over its own batch-header scan
   (``mode=batches``: headers only, no record decoded but the output topic's), at the same
   time, from four threads of this driver (Spark runs concurrent jobs; their small queries
   are latency-bound, so the cores overlap them), then release the scan.

The JSON report is ``{"ordering": ..., "skew": ..., "lag": ..., "transactions": ..., "verdict": ...}`` (each
as its own job writes it); ``verdict`` is ``failed`` when any audit failed, else ``ok``
when any is ``ok``, else ``not enough data``. Exit code 3 when it is ``failed``.
``--plot-dir DIR`` writes ``skew.png``, ``lag.png`` and (with a commit history)
``lag-history.png``.

Invariants: the three reports equal those of the three jobs run one by one on the same
data (the test checks it). Thread-safety: one run at a time (one SparkSession); inside a
run the three audit threads share only the persisted scan (read-only).
"""

from __future__ import annotations

import os
import sys
from concurrent.futures import ThreadPoolExecutor
from typing import Optional, Sequence

from kafkasim.spark_jobs import common, connect, options, values
from kafkasim.spark_jobs.progress import Progress
from kafkasim.spark_jobs.session import plain_ctrl_c, quiet_interrupts, stop_now

__all__ = ["build_report", "text", "run", "main", "AUDITS"]

AUDITS = ("ordering", "skew", "lag", "transactions")


def build_report(spark, data_dir: str, topics: list[str], args, progress: Optional[Progress] = None) -> dict:
    """One scan → the four reports (see the module docstring)."""
    from kafkasim.spark_jobs import lag, ordering, skew, transactions
    from kafkasim.spark_jobs.partials import Spec
    from kafkasim.spark_jobs.scan import Scan
    progress = progress or Progress.disabled()
    plot_dir = getattr(args, "plot_dir", None)
    plot = (lambda name: os.path.join(plot_dir, name)) if plot_dir else (lambda name: None)
    with progress.phase("reading", f"{len(topics)} topic(s)"):
        commits = lag.read_commits(spark, data_dir, topics, args.group, args.corrupt)
        spec = Spec(window_ms=args.window_ms, sequence=args.sequence, marks=lag.marks(commits))
        scan = Scan(spark, data_dir, topics, spec, args.corrupt)
        scanned = [lag.OFFSETS_TOPIC, *topics] if lag.OFFSETS_TOPIC in common.topic_partition_counts(data_dir) \
            else list(topics)
        corruption = common.corruption_of(spark, data_dir, scanned)
    try:
        scan.totals()                # materializes the key rows once, before the audits share them
        mine = lambda ts: [c for c in corruption if c["topic"] in set(ts)]  # noqa: E731
        jobs = {
            "ordering": lambda: ordering.build_report(
                spark, data_dir, topics, sequence=args.sequence, partitioner=args.partitioner,
                corrupt=args.corrupt, max_details=args.max_details,
                min_records_per_partition=args.min_records_per_partition, scan=scan, corruption=mine(topics),
                value_format=args.value_format),
            "skew": lambda: skew.build_report(
                spark, data_dir, topics, top_k=args.top_k, window_ms=args.window_ms,
                window_threshold=args.window_threshold, max_over_avg_limit=args.max_over_avg,
                corrupt=args.corrupt, plot=plot("skew.png"),
                min_records_per_partition=args.min_records_per_partition, scan=scan, corruption=mine(topics)),
            "lag": lambda: lag.build_report(
                spark, data_dir, topics, args.group, max_lag_records=args.max_lag_records,
                max_lag_ms=args.max_lag_ms, corrupt=args.corrupt, plot=plot("lag.png"), scan=scan,
                commits=commits, corruption=corruption),
            "transactions": lambda: transactions.build_report(
                spark, data_dir, topics, input_topic=args.input_topic, output_topic=args.output_topic,
                now_ms=args.now_ms, max_transaction_timeout_min=args.max_transaction_timeout, corrupt=args.corrupt,
                max_details=args.max_details,
                corruption=mine(topics) if {args.input_topic, args.output_topic} - {None} <= set(topics) else None),
        }
        with progress.phase("auditing", "ordering, skew, lag and transactions in parallel"):
            pool = ThreadPoolExecutor(len(jobs), thread_name_prefix="audit")
            try:
                running = {name: pool.submit(progress.timed, name, job) for name, job in jobs.items()}
                out = {name: f.result() for name, f in running.items()}
            except BaseException:   # Ctrl-C: do not wait for the running jobs; run() ends Spark first
                pool.shutdown(wait=False, cancel_futures=True)
                raise
            pool.shutdown()
    finally:
        scan.close()
    verdicts = [out[a]["verdict"] for a in AUDITS]
    out["verdict"] = (common.VERDICT_FAILED if common.VERDICT_FAILED in verdicts else
                      common.VERDICT_OK if common.VERDICT_OK in verdicts else common.VERDICT_NOT_ENOUGH_DATA)
    out["timings_s"] = {name: round(s, 3) for name, s in progress.timings}
    return out


def text(rep: dict) -> str:
    from kafkasim.spark_jobs import lag, ordering, skew, transactions
    texts = {"ordering": ordering.text, "skew": skew.text, "lag": lag.text, "transactions": transactions.text}
    parts = [texts[a](rep[a]) for a in AUDITS]
    def summary(a: str) -> str:     # a log with no transaction has no transactions audit to speak of
        return "transactions none" if rep[a].get("no_transactions") else f"{a} {rep[a]['verdict']}"
    parts.append("audit all: " + ", ".join(summary(a) for a in AUDITS)
                 + f" -> {rep['verdict'].upper()}")
    return "\n".join(parts)


def violations(rep: dict) -> int:
    return sum(common.violations(rep[a]) for a in AUDITS)


def run(args, spark=None) -> int:
    progress = Progress()
    with progress.phase("checking inputs"):
        data_dir = common.data_dir_of(args)
        topics = common.check_inputs(data_dir, args.topic)           # before the JVM starts
        from kafkasim.spark_jobs.transactions import check_args
        check_args(args, data_dir)                                   # its input/output topics and limits
        size = common.input_bytes(data_dir, topics)
    own = spark is None
    quiet_interrupts()      # Ctrl-C: one line from the CLI, no py4j tracebacks
    with progress.phase("starting Spark"):
        spark = common.open_spark(args, spark, input_bytes=size)
    if own:
        plain_ctrl_c()      # Ctrl-C is handled here: stop_now below
    try:
        with values.task_errors():
            return common.run_job(args, lambda: build_report(spark, data_dir, topics, args, progress), text,
                                  violations)
    except KeyboardInterrupt:
        if own:     # Ctrl-C: end the JVM now rather than wait for its jobs and shutdown hooks
            own = False
            stop_now(spark)
        raise
    finally:
        if own:     # stop what we started: a cluster otherwise relaunches executors while we exit
            connect.end(spark)


def main(argv: Optional[Sequence[str]] = None, spark=None) -> int:
    p = common.job_parser("audit_all", "Run the ordering, skew, lag and transactions audits in one Spark session.",
                          "spark-submit spark_jobs/audit_all.py --data-dir ./kafkasim-data --json audits.json")
    options.all_audits(p)
    return run(p.parse_args(argv), spark)


if __name__ == "__main__":
    sys.exit(main())
