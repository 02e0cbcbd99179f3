"""``kafkasim audit watch``: re-run ``audit all`` on a data dir as its log grows, and print what changed.

One Spark session is opened for the whole watch (the data dir's Spark Connect server when
``kafkasim spark start`` runs, or ``--remote``; else a local session, warm after its first
run), then the loop:

1. run ``audit all`` (:func:`kafkasim.spark_jobs.audit_all.build_report`) and print a
   one-line summary of the first report;
2. poll the log's :func:`fingerprint` (the size of every segment of the audited topics
   and of ``__consumer_offsets``) every ``POLL_S`` seconds;
3. when it changed, or ``--interval`` seconds have passed since the last run, run again
   and print :func:`changes` against the previous report: verdicts that moved, violation
   counts that moved, new corrupt batches, records added, skew's max/avg moving, lag's
   total moving, new hot keys at the top. Nothing changed: nothing printed.

``--max-runs N`` stops after N runs (for scripts and tests); Ctrl-C stops it (exit 0, as
Kafka's tools that run until stopped). ``--json``: one JSON object a line per run
(``{"run", "changes", "verdict", "records"}``). :func:`changes` is a pure function of
two reports; thread-safety: one watch per process.
"""

from __future__ import annotations

import json
import sys
import time
from typing import Callable, Optional, Sequence

from kafkasim.spark_jobs import common, connect
from kafkasim.spark_jobs.logdir import LogDir

__all__ = ["fingerprint", "changes", "summary", "watch", "run", "POLL_S"]

POLL_S = 0.5
"""How often the log's size is looked at between runs (seconds)."""

_AUDITS = ("ordering", "skew", "lag", "transactions")


def fingerprint(data_dir: str, topics: Sequence[str]) -> tuple:
    """What a change of the log shows in: ``((topic, partition, segment, size), ...)`` of the
    audited topics and ``__consumer_offsets`` (commits move the lag)."""
    wanted = set(topics) | {"__consumer_offsets"}
    return tuple(sorted((s.topic, s.partition, s.path, s.size) for s in LogDir(data_dir).segments(wanted)))


def summary(rep: dict) -> str:
    """One line: every audit's verdict, records, and the overall verdict."""
    parts = [f"{a} {rep[a]['verdict']}" for a in _AUDITS]
    return f"{rep['skew']['records']:,} records; " + ", ".join(parts) + f" -> {rep['verdict'].upper()}"


def _num(x) -> Optional[float]:
    return None if x is None else float(x)


def changes(old: dict, new: dict, *, ratio_step: float = 0.01) -> list[str]:
    """What moved between two ``audit all`` reports, as sentences (empty: nothing did).

    >>> a = {"verdict": "ok", "skew": {"records": 10, "verdict": "ok", "max_over_avg": 1.0, "violations": {}},
    ...      "ordering": {"verdict": "ok", "violations": {"duplicate": 0}}, "lag": {"verdict": "ok",
    ...      "total_lag_records": 0, "violations": {}}, "transactions": {"verdict": "ok", "violations": {}}}
    >>> b = json.loads(json.dumps(a)); b["skew"]["records"] = 15; b["ordering"]["violations"]["duplicate"] = 2
    >>> changes(a, b)
    ['records: 10 -> 15 (+5)', 'ordering duplicate: 0 -> 2 (+2)']
    """
    out = []
    r0, r1 = old["skew"]["records"], new["skew"]["records"]
    if r0 != r1:
        out.append(f"records: {r0:,} -> {r1:,} ({r1 - r0:+,})")
    for a in _AUDITS:
        v0, v1 = old[a]["verdict"], new[a]["verdict"]
        if v0 != v1:
            out.append(f"{a}: {v0} -> {v1}")
        before, after = old[a].get("violations") or {}, new[a].get("violations") or {}
        for k in sorted(set(before) | set(after)):
            n0, n1 = before.get(k, 0), after.get(k, 0)
            if n0 != n1:
                out.append(f"{a} {k}: {n0:,} -> {n1:,} ({n1 - n0:+,})")
        c0, c1 = len(old[a].get("corrupt_batches") or ()), len(new[a].get("corrupt_batches") or ())
        if c1 > c0 and a == "skew":          # every audit lists the same corrupt batches: say it once
            out.append(f"corrupt batches: {c0} -> {c1}")
    m0, m1 = _num(old["skew"].get("max_over_avg")), _num(new["skew"].get("max_over_avg"))
    if m0 != m1 and (m0 is None or m1 is None or abs(m1 - m0) >= ratio_step):
        out.append(f"skew max/avg: {_fmt(m0)} -> {_fmt(m1)}")
    hot0 = [h["key"] for h in old["skew"].get("hot_keys") or ()][:3]
    hot1 = [h["key"] for h in new["skew"].get("hot_keys") or ()][:3]
    if hot0 != hot1 and hot1:
        out.append(f"hottest keys: {', '.join(map(str, hot1))}")
    l0, l1 = old["lag"].get("total_lag_records"), new["lag"].get("total_lag_records")
    if l0 != l1:
        out.append(f"lag: {l0:,} -> {l1:,} records")
    if old["verdict"] != new["verdict"]:
        out.append(f"audit all: {old['verdict']} -> {new['verdict']}")
    return out


def _fmt(x: Optional[float]) -> str:
    return "n/a" if x is None else f"{x:.3f}"


def watch(build: Callable[[], dict], look: Callable[[], tuple], emit: Callable[[int, dict, list[str]], None], *,
          interval_s: float, max_runs: Optional[int] = None, poll_s: float = POLL_S,
          sleep: Callable[[float], None] = time.sleep, now: Callable[[], float] = time.monotonic) -> int:
    """The loop of the module docstring over injected parts (``build`` runs the audits,
    ``look`` returns the fingerprint, ``emit(run, report, changes)`` prints); returns the runs done."""
    runs, last, seen, at = 0, None, None, 0.0
    while max_runs is None or runs < max_runs:
        mark = look()
        if last is not None and mark == seen and now() - at < interval_s:
            sleep(poll_s)
            continue
        seen, at = mark, now()
        rep = build()
        runs += 1
        emit(runs, rep, [] if last is None else changes(last, rep))
        last = rep
    return runs


def run(args, spark=None) -> int:
    """``kafkasim audit watch`` (see the module docstring)."""
    from kafkasim.spark_jobs import audit_all
    from kafkasim.spark_jobs.progress import Progress
    from kafkasim.spark_jobs.session import quiet_interrupts
    from kafkasim.spark_jobs.transactions import check_args
    common.require(args.interval > 0, f"--interval must be > 0 seconds, got {args.interval}")
    common.require(args.max_runs is None or args.max_runs >= 1, f"--max-runs must be >= 1, got {args.max_runs}")
    data_dir = common.data_dir_of(args)
    topics = common.check_inputs(data_dir, args.topic)
    check_args(args, data_dir)
    quiet_interrupts()
    own = spark is None
    spark = common.open_spark(args, spark, input_bytes=common.input_bytes(data_dir, topics))
    as_json = args.json_out == "-" or getattr(args, "json", False)

    def emit(n: int, rep: dict, moved: list[str]) -> None:
        if as_json:
            print(json.dumps({"run": n, "changes": moved, "verdict": rep["verdict"],
                              "records": rep["skew"]["records"]}), flush=True)
        elif n == 1:
            print(f"audit watch: {summary(rep)}", flush=True)
        elif moved:
            print(f"audit watch: run {n}: {summary(rep)}", flush=True)
            for line in moved:
                print(f"  {line}", flush=True)

    try:
        watch(lambda: audit_all.build_report(spark, data_dir, topics, args, Progress.disabled()),
              lambda: fingerprint(data_dir, topics), emit, interval_s=args.interval, max_runs=args.max_runs)
    except KeyboardInterrupt:
        pass
    finally:
        if own:
            connect.end(spark)
    return 0


def main(argv: Optional[Sequence[str]] = None, spark=None) -> int:
    from kafkasim.spark_jobs import options
    p = common.job_parser("watch", "Re-run audit all as the log grows and print what changed.",
                          "kafkasim audit watch --data-dir ./kafkasim-data --interval 10")
    options.watch(p)
    return run(p.parse_args(argv), spark)


if __name__ == "__main__":
    sys.exit(main())
