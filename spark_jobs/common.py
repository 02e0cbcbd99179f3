"""What every audit job shares: reading the log, the CLI skeleton, reports, charts, exit codes.

Each job module (``ordering``, ``skew``, ``lag``, ``repartition``, ``copartition``)
has pure ``DataFrame -> DataFrame`` transforms, a ``report(...)`` that turns their
(small) outputs into the JSON report, and ``main(argv, spark=None)`` that only
orchestrates read → transform → write through the helpers here.

Verdicts (``checks`` and ``verdict`` of every report) are :mod:`kafkasim.spark_jobs.verdicts`,
re-exported here.

Exit codes (``main`` and ``kafkasim audit``): :data:`EXIT_OK` (0) when the verdict is
``ok`` or ``not enough data``, :data:`EXIT_VIOLATIONS` (3) when it is ``failed``;
errors exit 1 and usage errors 2, as everywhere in kafkasim.

Hashing is vectorised: :func:`partition_for_keys` runs ``kafkasim.partitioning.partitioners.partition_many``
on whole Arrow batches inside ``mapInArrow``; there is no per-row Python UDF.

Thread-safety: functions are pure or touch only their arguments; charts use
matplotlib's Agg backend through the object API (no global pyplot state).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
from typing import Callable, Iterable, Optional, Sequence

from kafkasim.errors import InvalidArgumentError, UnknownTopicOrPartitionError
from kafkasim.spark_jobs.logdir import LogDir
from kafkasim.spark_jobs.session import default_parallelism, in_process_master, is_connect, master_of

__all__ = [
    "EXIT_OK", "EXIT_VIOLATIONS", "violations", "read_log", "topic_partition_counts", "topic_partition_histories",
    "partition_for_keys",
    "header_value", "job_parser", "open_spark", "run_job", "write_json", "plot_partitions",
    "gini", "lorenz_points", "corruption_of", "task_path", "key_text", "default_topics", "data_dir_of", "require",
    "VERDICT_OK", "VERDICT_FAILED", "VERDICT_NOT_ENOUGH_DATA", "MIN_RECORDS_PER_PARTITION", "check",
    "verdict_of", "checks_text", "shuffle_partitions_for", "input_bytes", "input_plan_options",
    "session_conf_for", "SMALL_INPUT_CONF", "SMALL_INPUT_JVM_OPTIONS", "reads_in_driver",
    "one_task_per_partition", "is_connect", "master_of", "in_process_master", "default_parallelism",
]

EXIT_OK = 0
EXIT_VIOLATIONS = 3

from kafkasim.spark_jobs.verdicts import (  # noqa: E402  (the verdict rules, re-exported for the jobs)
    MIN_RECORDS_PER_PARTITION, VERDICT_FAILED, VERDICT_NOT_ENOUGH_DATA, VERDICT_OK, check, checks_text,
    verdict_of)


# -- reading -----------------------------------------------------------------------------
LOCAL_SCAN_BYTES = 32 << 20
"""Up to this many bytes of segments on a local path, :func:`read_log` decodes in the
driver and :func:`corruption_of` scans there: at ≈3 M records/s per core that takes well
under a second, less than one Spark job's Python-worker start-up and planning."""


def read_log(spark, data_dir: str, topics: Optional[Sequence[str]] = None, *,
             corrupt: str = "report", columns: Optional[Sequence[str]] = None,
             local_max_bytes: Optional[int] = None, **options):
    """The log under ``data_dir`` as a DataFrame (``kafkasim.spark_jobs.datasource.SCHEMA``, or just
    ``columns`` of it: the reader then builds and ships only those).

    A local log of at most ``local_max_bytes`` (default :data:`LOCAL_SCAN_BYTES`; 0: never)
    is decoded in this process by the data source's own reader
    (``datasource.read_local_table``) and handed to Spark as an Arrow-backed local
    relation: the same rows, without a Python worker start per scan task and planning
    step — which is most of a small audit's time. ``mode=partials`` (the audits' one scan,
    :mod:`kafkasim.spark_jobs.partials`) and ``mode=commits`` are read the same way. This applies on ``local[...]`` masters
    only; larger logs, URIs and cluster masters (``local-cluster`` included) are read by
    the ``kafkasim`` data source on the executors."""
    mode = options.get("mode")
    if reads_in_driver(spark, data_dir, topics, mode, local_max_bytes):
        from kafkasim.spark_jobs.datasource import read_local_table, schema_of, SCHEMA
        from kafkasim.spark_jobs.partials import PARTIALS_SCHEMA
        from kafkasim.spark_jobs.offset_commits import COMMITS_SCHEMA
        from kafkasim.spark_jobs.batch_headers import BATCHES_SCHEMA
        ddl = {"partials": PARTIALS_SCHEMA, "commits": COMMITS_SCHEMA, "batches": BATCHES_SCHEMA}.get(mode) or (
            schema_of(columns) if columns else SCHEMA)
        table = read_local_table(data_dir, list(topics) if topics else None,
                                 list(columns) if columns else None, corrupt, **options)
        return spark.createDataFrame(table, schema=ddl)
    reader = spark.read.format("kafkasim").option("corrupt", corrupt)
    for k, v in input_plan_options(spark).items():
        reader = reader.option(k, v)
    if columns:
        from kafkasim.spark_jobs.datasource import schema_of
        reader = reader.schema(schema_of(columns))
    if topics:
        reader = reader.option("topics", ",".join(topics))
    for k, v in options.items():
        if v is not None:
            reader = reader.option(k, str(v))
    return reader.load(task_path(data_dir))


def task_path(data_dir: str) -> str:
    """``data_dir`` as the scan tasks open it: a local path made absolute (executors of a
    standalone or other cluster run in their own work dirs, not this process's cwd); a URI
    as given."""
    return data_dir if not LogDir(data_dir).is_local else os.path.abspath(data_dir)


def reads_in_driver(spark, data_dir: str, topics: Optional[Sequence[str]], mode: Optional[str] = None,
                    local_max_bytes: Optional[int] = None) -> bool:
    """Whether :func:`read_log` reads these topics in this process (see its docstring)."""
    limit = LOCAL_SCAN_BYTES if local_max_bytes is None else local_max_bytes
    log_dir = LogDir(data_dir)
    if not (limit > 0 and in_process_master(spark) and log_dir.is_local
            and mode in (None, "records", "partials", "commits", "batches")):
        return False
    return sum(s.size for s in log_dir.segments(set(topics) if topics else None)) <= limit


def one_task_per_partition(spark, data_dir: str, topics: Optional[Sequence[str]], **options) -> bool:
    """Whether the scan :func:`read_log` would run reads every (topic, partition) in one
    task (all its pieces, consecutive): the plan of ``datasource.planned_tasks`` with the
    options that read would use."""
    from kafkasim.spark_jobs.datasource import planned_tasks
    plan = {} if reads_in_driver(spark, data_dir, topics, options.get("mode")) else input_plan_options(spark)
    seen: set = set()
    for task in planned_tasks(data_dir, list(topics) if topics else None, **plan, **options):
        mine = {(p.seg.topic, p.seg.partition) for p in task}
        if mine & seen:
            return False
        seen |= mine
    return True


_SIZE_UNITS = {"": 1, "b": 1, "k": 1 << 10, "kb": 1 << 10, "m": 1 << 20, "mb": 1 << 20,
               "g": 1 << 30, "gb": 1 << 30, "t": 1 << 40, "tb": 1 << 40}


def _bytes_conf(text: str) -> int:
    """A Spark byte-size setting (``134217728b``, ``128m``, ``4MB``) in bytes."""
    import re
    m = re.fullmatch(r"\s*(\d+)\s*([a-zA-Z]*)\s*", str(text))
    if not m or m.group(2).lower() not in _SIZE_UNITS:
        raise InvalidArgumentError(f"not a byte size: {text!r}")
    return int(m.group(1)) * _SIZE_UNITS[m.group(2).lower()]


def input_plan_options(spark) -> dict[str, str]:
    """The data source's planning options from the session, as Spark's file sources take
    them: ``spark.sql.files.maxPartitionBytes``, ``spark.sql.files.openCostInBytes`` and
    ``spark.sql.files.minPartitionNum`` (default: the default parallelism)."""
    conf = spark.conf
    out = {"maxPartitionBytes": str(_bytes_conf(conf.get("spark.sql.files.maxPartitionBytes", "128m"))),
           "openCostInBytes": str(_bytes_conf(conf.get("spark.sql.files.openCostInBytes", "4m")))}
    min_parts = conf.get("spark.sql.files.minPartitionNum", None)
    out["minPartitionNum"] = str(int(min_parts) if min_parts else default_parallelism(spark))
    return out


def topic_partition_counts(data_dir: str) -> dict[str, int]:
    """Current partition count of every topic, from ``meta/topics/*.json``."""
    return {name: m.partitions for name, m in LogDir(data_dir).topic_metadata().items()}


def topic_partition_histories(data_dir: str) -> dict[str, list[dict]]:
    """The partition-count history of every topic that has one (grown by a broker that
    keeps it), from ``meta/topics/*.json`` (storage/FORMAT.md §1.2)."""
    return {name: list(m.history) for name, m in LogDir(data_dir).topic_metadata().items() if m.history}


def corruption_of(spark, data_dir: str, topics: Optional[Sequence[str]] = None) -> list[dict]:
    """Corrupt batches under ``data_dir`` (see ``datasource.scan_corruption``): the same
    per-segment scan, as a Spark job, or in this process for a small local log
    (:data:`LOCAL_SCAN_BYTES`); same rows, same order either way."""
    from kafkasim.spark_jobs.datasource import scan_corruption, scan_segment_corruption
    log_dir = LogDir(data_dir)
    segs = log_dir.segments(set(topics) if topics else None)
    if in_process_master(spark) and log_dir.is_local and sum(s.size for s in segs) <= LOCAL_SCAN_BYTES:
        found = [row for s in segs for row in scan_segment_corruption(log_dir, s)]
        return sorted(found, key=lambda r: (r["topic"], r["partition"], r["segment"], r["position"]))
    return scan_corruption(spark, task_path(data_dir), list(topics) if topics else None)


def header_value(name: str):
    """Column: the value (binary) of the last header called ``name``, or null."""
    from pyspark.sql import functions as F
    return F.expr(f"try_element_at(filter(headers, h -> h.key = '{_sql_str(name)}'), -1).value")


def _sql_str(s: str) -> str:
    return s.replace("\\", "\\\\").replace("'", "\\'")


def partition_for_keys(df, counts_col: str, partitioner: str = "murmur2", *,
                       key_col: str = "key", out_col: str = "expected"):
    """Append ``out_col``: ``array<int>``, the partition ``partitioner`` picks for ``key_col``
    under each partition count in the ``array<int>`` column ``counts_col`` (same order).

    Runs ``kafkasim.partitioning.partitioners.partition_many`` once per (Arrow batch, count): vectorised.
    Null keys get a null array (keyless records are not hashed).
    """
    import pyarrow as pa
    from pyspark.sql.types import ArrayType, IntegerType, StructField, StructType

    schema = StructType(df.schema.fields + [StructField(out_col, ArrayType(IntegerType()))])

    def hash_batches(batches: Iterable[pa.RecordBatch]):
        import numpy as np
        import pyarrow.compute as pc
        from kafkasim.partitioning.partitioners import partition_many
        for batch in batches:
            keys = batch.column(key_col)
            counts = batch.column(counts_col)
            flat = pc.list_flatten(counts).to_numpy(zero_copy_only=False)
            rows = pc.list_parent_indices(counts).to_numpy(zero_copy_only=False)
            out = np.full(len(flat), -1, dtype=np.int32)
            for c in np.unique(flat):       # one vectorised call per distinct partition count
                cells = np.nonzero(flat == c)[0]
                out[cells] = partition_many(keys.take(pa.array(rows[cells])), int(c), partitioner=partitioner)
            lengths = pc.fill_null(pc.list_value_length(counts), 0).to_numpy(zero_copy_only=False)
            offsets = np.zeros(len(lengths) + 1, dtype=np.int32)
            np.cumsum(lengths, out=offsets[1:])
            mask = pc.or_(pc.is_null(keys), pc.is_null(counts))
            expected = pa.ListArray.from_arrays(pa.array(offsets), pa.array(out, pa.int32()), mask=mask)
            yield batch.append_column(out_col, expected)

    return df.mapInArrow(hash_batches, schema)


# -- the CLI skeleton --------------------------------------------------------------------
def job_parser(prog: str, description: str, example: str) -> argparse.ArgumentParser:
    """An argument parser with the options every audit job shares."""
    p = argparse.ArgumentParser(prog=prog, description=description,
                                epilog=f"Example:\n  {example}",
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    from kafkasim.spark_jobs.options import add_common_options
    add_common_options(p)
    return p


def data_dir_of(args) -> str:
    return args.data_dir or os.environ.get("KAFKASIM_DATA_DIR") or "./kafkasim-data"


def input_bytes(data_dir: str, topics: Optional[Sequence[str]]) -> int:
    """Bytes of the segment files of ``topics`` (all topics when None): the audit's input."""
    return sum(s.size for s in LogDir(data_dir).segments(set(topics) if topics else None))


SHUFFLE_BYTES = 128 << 20   # input bytes per shuffle partition beyond the core count


def shuffle_partitions_for(input_bytes: int, parallelism: int, cap: int = 200) -> int:
    """Shuffle partitions for an audit over ``input_bytes`` of segments: one per core, plus
    one per 128 MiB of input beyond that, at most ``cap`` (Spark's default count): the
    audits shuffle small aggregates, so 200 empty partitions only cost task launches.

    >>> shuffle_partitions_for(5 << 20, 2), shuffle_partitions_for(10 << 30, 2)
    (2, 80)
    """
    return max(1, min(cap, max(int(parallelism), math.ceil(input_bytes / SHUFFLE_BYTES))))


SMALL_INPUT_CONF = {"spark.sql.shuffle.partitions": "1", "spark.sql.adaptive.enabled": "false",
                    "spark.sql.codegen.wholeStage": "false", "spark.sql.codegen.factoryMode": "NO_CODEGEN"}
"""SQL settings of a session this process starts for a small input (at most
:data:`LOCAL_SCAN_BYTES`): what such an audit shuffles is a few MB of partial aggregates
(:mod:`kafkasim.spark_jobs.partials`), so one shuffle partition, no adaptive re-planning
and interpreted expressions (no Janino compile per stage on a cold JVM) cost less than
they save. Measured on the 100k-record log of ``make bench``: 62 Spark jobs become 21."""


SMALL_INPUT_JVM_OPTIONS = ("-XX:TieredStopAtLevel=1",)
"""Driver JVM options of a local session this process starts for a small input: the JIT's
first tier only. A small audit is a JVM start and a few dozen short queries; C2's
compilations of Spark's own code cost more CPU than they save before the process exits
(measured on the 100k-record log of ``make bench``: 36 → 22 CPU-seconds, on 2 cores). A
large audit keeps the JVM's default tiered compilation."""


def session_conf_for(input_bytes: int, parallelism: int) -> dict[str, str]:
    """The SQL settings :func:`open_spark` gives a session it starts for ``input_bytes`` of input."""
    if input_bytes <= LOCAL_SCAN_BYTES:
        return dict(SMALL_INPUT_CONF)
    return {"spark.sql.shuffle.partitions": str(shuffle_partitions_for(input_bytes, parallelism))}


def open_spark(args, spark=None, *, input_bytes: Optional[int] = None):
    """``spark`` if given (tests pass theirs), else a session from ``build_session``.

    The master is ``--master`` if given; else a Spark Connect server (``--remote``,
    ``$SPARK_REMOTE``, or the one ``kafkasim spark start`` recorded in the data dir:
    :func:`kafkasim.spark_jobs.connect.remote_url`); else the one ``spark-submit`` put in the
    Spark conf; else ``local[*]``. With ``input_bytes``, a session started here gets
    :func:`session_conf_for` the input (``spark.sql.shuffle.partitions`` sized to it, and
    :data:`SMALL_INPUT_CONF` for a small one), each unless the conf already sets it, and a
    local driver JVM started here for a small input gets :data:`SMALL_INPUT_JVM_OPTIONS`.
    """
    if spark is not None:
        return spark
    session = _open(args, small=input_bytes is not None and input_bytes <= LOCAL_SCAN_BYTES)
    if input_bytes is not None:
        conf = session_conf_for(input_bytes, default_parallelism(session))
        if is_connect(session):     # ours alone, but maybe a warm one an earlier audit set: set or unset each
            for k in sorted(set(SMALL_INPUT_CONF) | set(conf)):
                if k in conf:
                    session.conf.set(k, conf[k])
                else:
                    session.conf.unset(k)
            return session
        given = session.sparkContext.getConf().contains
        for k, v in conf.items():
            if not given(k):      # what the user or spark-submit set wins
                session.conf.set(k, v)
    return session


def _open(args, small: bool = False):
    from kafkasim.spark_jobs.session import build_session
    master = args.master
    if not master:   # a warm server: --remote, $SPARK_REMOTE, or `kafkasim spark start` on this data dir
        from kafkasim.spark_jobs import connect
        url = connect.remote_url(getattr(args, "remote", None), data_dir_of(args))
        if url:
            return connect.session(url, data_dir=data_dir_of(args))
    if not master:   # under spark-submit the JVM is already up and names the master
        master = None if "PYSPARK_GATEWAY_PORT" in os.environ else "local[*]"
    in_process = bool(master) and master.startswith("local") and not master.startswith("local-cluster")
    return build_session(app_name="kafkasim-audit", master=master, verbose=getattr(args, "verbose", False),
                         ui=getattr(args, "spark_ui", False),
                         jvm_options=SMALL_INPUT_JVM_OPTIONS if small and in_process else ())


def check_inputs(data_dir: str, topics: Optional[Sequence[str]]) -> list[str]:
    """Validate the data dir and the topics **before** Spark starts, so a typo costs
    milliseconds, not a JVM start: the data dir must exist and hold kafkasim topic
    metadata, and every named topic must exist. Returns the topics to audit."""
    log_dir = LogDir(data_dir)
    if log_dir.is_local and not os.path.isdir(data_dir):
        raise InvalidArgumentError(f"data dir {data_dir} does not exist (check --data-dir / $KAFKASIM_DATA_DIR)")
    if not log_dir.topic_metadata():
        raise InvalidArgumentError(f"data dir {data_dir} holds no kafkasim topics (no meta/topics/*.json)")
    return default_topics(data_dir, topics)


def default_topics(data_dir: str, topics: Optional[Sequence[str]]) -> list[str]:
    """``topics`` if given, else every topic in the metadata that is not internal (``__*``)."""
    known = topic_partition_counts(data_dir)
    if topics:
        missing = sorted(set(topics) - set(known))
        if missing:
            raise UnknownTopicOrPartitionError(
                f"no such topic(s) {', '.join(missing)} under {data_dir!r} (no meta/topics/<topic>.json)")
        return list(topics)
    return sorted(t for t in known if not t.startswith("__"))


def run_job(args, build: Callable[[], dict], text: Callable[[dict], str],
            violations: Callable[[dict], int]) -> int:
    """Build the report, write JSON/text, return the exit code (from ``verdict`` when the
    report has one: only ``failed`` exits 3)."""
    report = build()
    if args.json_out:
        write_json(report, args.json_out)
    if args.json_out != "-":
        print(text(report))
    if "verdict" in report:
        return EXIT_VIOLATIONS if report["verdict"] == VERDICT_FAILED else EXIT_OK
    return EXIT_VIOLATIONS if violations(report) else EXIT_OK


def violations(rep: dict) -> int:
    """Violations of any job's report: its ``violations`` counts plus corrupt batches skipped."""
    return sum(rep["violations"].values()) + len(rep["corrupt_batches"])


def write_json(report: dict, path: str) -> None:
    data = json.dumps(report, indent=2, default=_json_default)
    if path == "-":
        sys.stdout.write(data + "\n")
        return
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        f.write(data + "\n")


def _json_default(o):
    if isinstance(o, (bytes, bytearray)):
        return key_text(bytes(o))
    if hasattr(o, "item"):
        return o.item()
    return str(o)


def key_text(key: Optional[bytes]) -> Optional[str]:
    """A key for humans and JSON: UTF-8 text if it decodes, else ``0x``-prefixed hex."""
    if key is None:
        return None
    try:
        s = key.decode("utf-8")
        if s.isprintable():
            return s
    except UnicodeDecodeError:
        pass
    return "0x" + key.hex()


# -- figures -----------------------------------------------------------------------------
def gini(values: Sequence[float]) -> float:
    """Gini coefficient of non-negative ``values`` (0 = perfectly even, →1 = one holds all).

    ``G = Σ_i (2i − n − 1)·x_(i) / (n · Σx)`` over ascending ``x_(i)``, i = 1..n;
    0 for an empty or all-zero input. ``gini([1, 1, 1, 1]) == 0``; ``gini([0, 0, 0, 4]) == 0.75``.
    """
    xs = sorted(float(v) for v in values)
    n, total = len(xs), sum(xs)
    if n == 0 or total == 0:
        return 0.0
    return sum((2 * i - n - 1) * x for i, x in enumerate(xs, start=1)) / (n * total)


def lorenz_points(values: Sequence[float]) -> tuple[list[float], list[float]]:
    """Lorenz curve: cumulative share of partitions (x) vs of traffic (y), from (0, 0)."""
    xs = sorted(float(v) for v in values)
    n, total = len(xs), sum(xs) or 1.0
    cx, cy, acc = [0.0], [0.0], 0.0
    for i, x in enumerate(xs, start=1):
        acc += x
        cx.append(i / n)
        cy.append(acc / total)
    return cx, cy


def plot_partitions(path: str, labels: Sequence[str], values: Sequence[float], title: str,
                    ylabel: str, *, limit_over_avg: Optional[float] = None,
                    xlabel: str = "topic-partition") -> dict:
    """PNG: per-partition bars with the average line, and the Lorenz curve beside them.

    With ``limit_over_avg`` the limit (``limit_over_avg`` × average, the line a verdict
    depends on) is drawn too, and the bars above it are red and named in the legend.
    Returns ``{"average", "limit", "above"}`` (``above``: the labels of the red bars)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(11, 4.5))
    FigureCanvasAgg(fig)
    ax, lz = fig.subplots(1, 2, gridspec_kw={"width_ratios": [2, 1]})
    xs = range(len(values))
    avg = sum(values) / len(values) if values else None
    limit = avg * limit_over_avg if avg is not None and limit_over_avg is not None else None
    above = [i for i, v in enumerate(values) if limit is not None and v > limit]
    ax.bar(xs, values, color=["#C44E52" if i in above else "#4C72B0" for i in xs])
    if avg is not None:
        ax.axhline(avg, color="grey", linestyle="--", label=f"average {avg:,.1f}")
    if limit is not None:
        ax.axhline(limit, color="#C44E52", linestyle="-",
                   label=f"limit {limit_over_avg:g} x average = {limit:,.1f}")
    if values:
        from matplotlib.patches import Patch
        handles, _ = ax.get_legend_handles_labels()
        if above:
            handles.append(Patch(color="#C44E52", label=f"above the limit: {len(above)}"))
        ax.legend(handles=handles, loc="upper right", fontsize=8)
    ax.set_xticks(list(xs))
    many = len(labels) > 12
    ax.set_xticklabels(labels, rotation=60 if many else 0, fontsize=8, ha="right" if many else "center")
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(title, fontsize=10)
    cx, cy = lorenz_points(values)
    lz.plot(cx, cy, marker=".", label=f"Lorenz (Gini {gini(values):.3f})")
    lz.plot([0, 1], [0, 1], color="grey", linestyle=":", label="equality")
    lz.set_xlabel("share of partitions")
    lz.set_ylabel("share of traffic")
    lz.legend(loc="upper left")
    fig.tight_layout()
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    fig.savefig(path, format="png", dpi=100)
    return {"average": avg, "limit": limit, "above": [labels[i] for i in above]}


def require(cond: bool, message: str) -> None:
    if not cond:
        raise InvalidArgumentError(message)
