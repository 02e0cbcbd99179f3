"""Warm a fresh Spark Connect server up on the data dir it serves: ``kafkasim spark start --warm-up N``.

A new server JVM plans and runs its first queries slowly: Spark's analyzer, optimizer and
planner, and the server's own gRPC path, are still interpreted bytecode until the JIT has
seen them run (measured here: a 2-record skew audit took 10 s on the server's first runs,
under 3 s once it had run a few). :func:`warm_up` runs ``audit all`` over the data dir's
topics ``runs`` times through a Spark Connect session, as an audit would (the same session
settings, through ``common.open_spark``), and discards the reports, so the first audit a
user runs is already a warm one. A data dir without topics is not warmed (nothing to read).
Thread-safety: one warm-up at a time per server.
"""

from __future__ import annotations

import time

from kafkasim.spark_jobs import audit_all, common, connect, options

__all__ = ["warm_up"]


def warm_up(data_dir: str, url: str, runs: int = 2) -> list[float]:
    """Run ``audit all`` on ``data_dir`` ``runs`` times on the server at ``url``; the wall
    time of each run (empty when the data dir holds no topic to audit, or ``runs`` is 0)."""
    common.require(runs >= 0, f"--warm-up must be >= 0 runs, got {runs}")
    if runs == 0 or not common.topic_partition_counts(data_dir):
        return []
    topics = common.default_topics(data_dir, None)
    if not topics:
        return []
    p = common.job_parser("warm-up", "warm-up", "kafkasim spark start --warm-up 2")
    options.all_audits(p)
    args = p.parse_args(["--data-dir", data_dir, "--remote", url])
    spark = common.open_spark(args, input_bytes=common.input_bytes(data_dir, topics))
    took = []
    try:
        for _ in range(runs):
            t0 = time.perf_counter()
            audit_all.build_report(spark, data_dir, topics, args)
            took.append(round(time.perf_counter() - t0, 3))
    finally:
        connect.end(spark)
    return took
