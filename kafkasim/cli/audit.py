"""``kafkasim audit all|ordering|skew|lag|repartition|copartition|transactions``: the Spark audits of a data dir.

Each subcommand parses the job's options (``spark_jobs/<job>.py``: the same options as
``spark-submit spark_jobs/<job>.py``) and calls the job's ``run``, which reads the
segment files directly (no broker needed), writes the JSON report (``--json OUT``, ``-``
for stdout) and a PNG (``--plot``, skew and lag), and prints a summary. Exit code 0 when
the audit is clean, 3 when it finds violations (1 on errors, 2 on usage errors).
Spark runs on the data dir's Spark Connect server when ``kafkasim spark start`` runs one
(or ``--remote sc://HOST:PORT``, or ``$SPARK_REMOTE``), else starts on ``local[*]``, unless
``--master`` says otherwise (``spark://127.0.0.1:7077`` from ``kafkasim spark cluster start``).
``audit watch`` re-runs ``audit all`` as the log grows (``kafkasim.spark_jobs.watch``). Registering the
commands imports no pyspark (options live in ``kafkasim.spark_jobs.options``), so other commands
start fast. Thread-safety: argparse wiring only; handlers run one job each.
"""

from __future__ import annotations

import argparse
import importlib

from kafkasim.cli.common import command
from kafkasim.spark_jobs.options import ADD_OPTIONS, add_common_options

__all__ = ["register", "JOBS"]

JOBS = {
    "all": ("Run the ordering, skew, lag and transactions audits in one Spark session.",
            "kafkasim audit all --data-dir ./kafkasim-data --plot-dir reports --json audits.json"),
    "ordering": ("Check per-key partition stability, send order and partitioner conformance.",
                 "kafkasim audit ordering --data-dir ./kafkasim-data --topic orders --json ordering.json"),
    "skew": ("Measure partition, hot-key and time-window skew (PNG chart with --plot).",
             "kafkasim audit skew --data-dir ./kafkasim-data --topic orders --plot skew.png"),
    "lag": ("Report each consumer group's lag in records and time from __consumer_offsets.",
            "kafkasim audit lag --data-dir ./kafkasim-data --plot lag.png"),
    "repartition": ("Show which keys and traffic move from N to M partitions; recommend a count.",
                    "kafkasim audit repartition --data-dir ./kafkasim-data --topic orders --to 12"),
    "copartition": ("Check that two topics are co-partitioned on their keys.",
                    "kafkasim audit copartition --data-dir ./kafkasim-data --topic orders --topic payments"),
    "transactions": ("Report read_committed views, aborted records, hanging transactions and inputs consumed twice.",
                     "kafkasim audit transactions --data-dir ./kafkasim-data --input-topic orders "
                     "--output-topic totals --json txn.json"),
    "watch": ("Re-run audit all every N seconds or when the log grows (warm on 'kafkasim spark start'); "
              "print what changed.",
              "kafkasim audit watch --data-dir ./kafkasim-data --interval 10"),
}


def register(sub) -> None:
    p = command(sub, "audit", help="Audit the on-disk log with Spark (no broker needed).",
                example="kafkasim audit skew --data-dir ./kafkasim-data --topic orders",
                handler=lambda args: p.print_help() or 2)
    jobs = p.add_subparsers(dest="job", metavar="JOB")
    for name, (help_, example) in JOBS.items():
        jp = command(jobs, name, help=help_, example=example, handler=_handler(name))
        add_common_options(jp)
        ADD_OPTIONS[name](jp)


def _module(name: str):
    return importlib.import_module(f"kafkasim.spark_jobs.{'audit_all' if name == 'all' else name}")


def _handler(name: str):
    def handle(args: argparse.Namespace) -> int:
        if not args.master and getattr(args, "argv", None) is not None:
            # `kafkasim spark start` on this data dir: run in a fork of its warm client
            from kafkasim.cli.warm_client import delegate
            from kafkasim.spark_jobs.common import data_dir_of
            code = delegate(data_dir_of(args), args.argv)
            if code is not None:
                return code
        return _module(name).run(args)
    return handle
