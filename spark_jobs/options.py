"""Command-line options of the audit jobs, shared by ``spark-submit spark_jobs/<job>.py`` and
``kafkasim audit <job>``. Kept free of pyspark imports so the CLI starts fast.
Pure argparse helpers; thread-safe.
"""

from __future__ import annotations

import argparse

__all__ = ["add_common_options", "ADD_OPTIONS"]


def add_common_options(p: argparse.ArgumentParser) -> None:
    """Options every audit job takes."""
    p.add_argument("--data-dir", default=None,
                   help="data dir: a path, file://, hdfs://, s3://... "
                        "(default: $KAFKASIM_DATA_DIR or ./kafkasim-data)")
    p.add_argument("--topic", action="append", default=None,
                   help="topic to audit (repeatable; default: every non-internal topic)")
    p.add_argument("--json", dest="json_out", metavar="OUT", default=None,
                   help="write the JSON report to OUT ('-' for stdout)")
    p.add_argument("--master", default=None,
                   help="Spark master, e.g. spark://127.0.0.1:7077 (default: the Spark Connect server of "
                        "--remote/$SPARK_REMOTE/`kafkasim spark start`, else local[*]; leave unset under spark-submit)")
    p.add_argument("--remote", default=None, metavar="sc://HOST:PORT",
                   help="run on this Spark Connect server (default: $SPARK_REMOTE, else the server "
                        "`kafkasim spark start` runs for the data dir, if any)")
    p.add_argument("--verbose", action="store_true",
                   help="show Spark's own logging and JVM output (hidden by default)")
    p.add_argument("--spark-ui", action="store_true",
                   help="start the Spark UI (off by default; it binds 127.0.0.1 in local mode)")
    p.add_argument("--corrupt", choices=("report", "fail"), default="report",
                   help="corrupt batches: report and skip (default) or fail the job")


MIN_RECORDS_PER_PARTITION = 20   # = common.MIN_RECORDS_PER_PARTITION (kept here: no pyspark import)


def _min_records(p: argparse.ArgumentParser) -> None:
    p.add_argument("--min-records-per-partition", type=int, default=MIN_RECORDS_PER_PARTITION, metavar="N",
                   help="sample floor: with fewer records per partition on average the verdict is "
                        f"'not enough data' (exit 0) unless a fact was found (default {MIN_RECORDS_PER_PARTITION}; 0 = off)")


VALUE_FORMATS = ("json", "msgpack")
"""``--value-format`` choices (:mod:`kafkasim.spark_jobs.values` decodes them)."""


def _value_format(p: argparse.ArgumentParser, prefix: str = "") -> None:
    p.add_argument("--value-format", choices=VALUE_FORMATS, default="json",
                   help=prefix + "how record values are encoded, for --sequence value:FIELD: json (default; "
                        "a value that is not JSON is not checked) or msgpack (as kafka-python's "
                        "value_serializer=msgpack.dumps writes it; a value that does not decode stops "
                        "the audit, naming its topic, partition and offset)")


def ordering(p: argparse.ArgumentParser) -> None:
    """Options of the ordering audit."""
    _min_records(p)
    p.add_argument("--sequence", default="header",
                   help="where the send sequence comes from: 'header' (kafkasim.producer/"
                        "kafkasim.seq, default) or 'value:FIELD' (a field of the value, see --value-format)")
    _value_format(p)
    p.add_argument("--partitioner", default="murmur2",
                   help="partitioner the producers should use (default murmur2, Kafka's)")
    p.add_argument("--max-details", type=int, default=1000,
                   help="at most this many detail rows in the report (counts stay exact)")


def skew(p: argparse.ArgumentParser) -> None:
    """Options of the skew audit."""
    _min_records(p)
    p.add_argument("--plot", default=None, metavar="OUT.png", help="write a PNG chart")
    p.add_argument("--top-k", type=int, default=10, help="hot keys to list (default 10)")
    p.add_argument("--window-ms", type=int, default=60_000, help="time window (default 60000 = 1 min)")
    p.add_argument("--window-threshold", type=float, default=5.0,
                   help="alert when a window's max/avg passes this (default 5)")
    p.add_argument("--max-over-avg", type=float, default=1.3,
                   help="violation when the overall max/avg passes this (default 1.3)")


def lag(p: argparse.ArgumentParser) -> None:
    """Options of the lag audit."""
    p.add_argument("--plot", default=None, metavar="OUT.png", help="write a PNG chart")
    p.add_argument("--group", action="append", default=None, help="group to report (repeatable; default all)")
    p.add_argument("--max-lag-records", type=int, default=None, help="violation above this lag (records)")
    p.add_argument("--max-lag-ms", type=int, default=None, help="violation above this lag (ms)")


def repartition(p: argparse.ArgumentParser) -> None:
    """Options of the repartition audit."""
    p.add_argument("--to", type=int, required=True, dest="to", help="partition count to move to (M)")
    p.add_argument("--from", type=int, default=None, dest="n_from",
                   help="partition count to move from (N; default: the topic's current count)")
    p.add_argument("--partitioner", default="murmur2", help="partitioner (default murmur2)")
    p.add_argument("--target-peak-mbps", type=float, default=None,
                   help="peak MB/s to size for (default: the peak measured in the log)")
    p.add_argument("--top-k", type=int, default=10, help="hot keys to list (default 10)")
    p.add_argument("--max-moved-traffic", type=float, default=None,
                   help="violation when more than this fraction of keyed traffic moves")


def copartition(p: argparse.ArgumentParser) -> None:
    """Options of the copartition audit."""
    p.add_argument("--max-details", type=int, default=1000, help="at most this many detail rows")


def _transactions(p: argparse.ArgumentParser, prefix: str = "") -> None:
    p.add_argument("--input-topic", default=None, metavar="TOPIC",
                   help=prefix + "input topic of a consume-transform-produce pipeline (needs --output-topic): "
                        "the inputs its output names are looked up in it")
    p.add_argument("--output-topic", default=None, metavar="TOPIC",
                   help=prefix + "output topic whose committed records name their input in the header "
                        "kafkasim-input ('<partition>:<offset>'); inputs named more than once are violations")
    p.add_argument("--now-ms", type=int, default=None, metavar="MS",
                   help=prefix + "the time open transactions are measured against, in ms since the epoch "
                        "(default: the newest timestamp in the log)")
    p.add_argument("--max-transaction-timeout", type=int, default=None, metavar="MINUTES",
                   help=prefix + "an open transaction older than this many minutes is hanging (default: the "
                        "transaction.timeout.ms recorded in __transaction_state for its transactional id, "
                        "else 15, as kafka-transactions.sh find-hanging)")


def transactions(p: argparse.ArgumentParser) -> None:
    """Options of the transactions audit."""
    _transactions(p)
    p.add_argument("--max-details", type=int, default=1000,
                   help="at most this many aborted-producer and duplicated-input rows in the report "
                        "(counts stay exact)")


def all_audits(p: argparse.ArgumentParser) -> None:
    """Options of ``audit all``: those of ordering, skew, lag and transactions (one ``--plot-dir`` for the charts)."""
    _min_records(p)
    p.add_argument("--sequence", default="header", help="ordering: where the send sequence comes from")
    _value_format(p, "ordering: ")
    p.add_argument("--partitioner", default="murmur2", help="ordering: the producers' partitioner (default murmur2)")
    p.add_argument("--max-details", type=int, default=1000,
                   help="ordering and transactions: at most this many detail rows")
    p.add_argument("--top-k", type=int, default=10, help="skew: hot keys to list (default 10)")
    p.add_argument("--window-ms", type=int, default=60_000, help="skew: time window (default 60000 = 1 min)")
    p.add_argument("--window-threshold", type=float, default=5.0, help="skew: window max/avg alert (default 5)")
    p.add_argument("--max-over-avg", type=float, default=1.3, help="skew: overall max/avg limit (default 1.3)")
    p.add_argument("--group", action="append", default=None, help="lag: group to report (repeatable)")
    p.add_argument("--max-lag-records", type=int, default=None, help="lag: violation above this lag (records)")
    p.add_argument("--max-lag-ms", type=int, default=None, help="lag: violation above this lag (ms)")
    _transactions(p, "transactions: ")
    p.add_argument("--plot-dir", default=None, metavar="DIR",
                   help="write skew.png, lag.png and lag-history.png into DIR")


def watch(p: argparse.ArgumentParser) -> None:
    """Options of ``audit watch``: those of ``audit all``, and how often to re-run."""
    all_audits(p)
    p.add_argument("--interval", type=float, default=10.0, metavar="N",
                   help="re-run at least every N seconds (default 10); a growing log re-runs it sooner")
    p.add_argument("--max-runs", type=int, default=None, metavar="N",
                   help="stop after N runs (default: until Ctrl-C)")


ADD_OPTIONS = {"ordering": ordering, "skew": skew, "lag": lag, "repartition": repartition, "copartition": copartition,
               "transactions": transactions, "all": all_audits, "watch": watch}
