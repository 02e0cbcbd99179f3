"""A Spark data source over kafkasim's on-disk log: ``spark.read.format("kafkasim").load(DIR)``.

Built on PySpark 4's Python data source API. The driver lists segment files
(:mod:`kafkasim.spark_jobs.logdir`); input partitions are planned as Spark's file
sources do (small segments share a task, big ones are cut at batch boundaries; see
``maxPartitionBytes``); each task decodes its pieces of segments with ``kafkasim.records`` (the one reader of the format: the shared
batch walk of ``framing``, records into Arrow buffers with ``columns``) and yields pyarrow
``RecordBatch``es of up to ``batchRows`` rows.

Schema (``SCHEMA``)::

    topic string, partition int, offset long,
    timestamp long          -- ms since the epoch (CreateTime or LogAppendTime, as stored);
                               use F.timestamp_millis("timestamp") for a timestamp column
    key binary, value binary (null = tombstone),
    headers array<struct<key:string, value:binary>>   -- in record order, duplicates kept
    producer_id long, producer_epoch int, sequence int   -- from the batch header; -1 if none
    batch_base_offset long, segment string            -- the .log file the row came from

Options (all optional, case-insensitive):

- ``path``: the data dir (``load(path)`` sets it): a local path, ``file://``, or any
  URI pyarrow's file systems open (``hdfs://``, ``s3://``, ``gs://``).
- ``topic`` / ``topics``: comma-separated topic names to read (default: every topic,
  internal ones included).
- ``startingOffset`` (inclusive) / ``endingOffset`` (exclusive): an offset range applied
  to every partition; segments outside it are not opened.
- ``startingTimestamp`` (inclusive) / ``endingTimestamp`` (exclusive): a time range in
  ms; batches whose ``max_timestamp`` is below the start are not decoded.
- ``corrupt``: ``report`` (default) or ``fail``. ``report``: a corrupt batch is
  logged (logger ``kafkasim.spark_jobs.datasource``) and warned (``CorruptBatchWarning``) with
  file and byte position, and the rest of that segment is skipped (the length field of
  a corrupt batch cannot be trusted; FORMAT.md §5); it never becomes a row.
  ``fail``: the task raises ``CorruptRecordError`` naming file and position.
- ``mode``: ``records`` (default) or ``corruption``. ``corruption`` returns one row per
  corrupt batch found instead of records, with ``CORRUPTION_SCHEMA``
  (``topic, partition, segment, position, skipped_bytes, error``): the countable side
  of ``corrupt=report``. :func:`scan_corruption` wraps it. ``partials`` returns the
  partial aggregates of :mod:`kafkasim.spark_jobs.partials` (``PARTIALS_SCHEMA``) instead
  of records: each task aggregates what it decodes (per key, per time window, the lag
  look-ups) and ships only that to the JVM; the option ``partials`` carries the spec
  (``partials.Spec.to_json()``). The audits read the log this way (``scan.Scan``).
  ``commits`` (for ``__consumer_offsets``) returns its offset commits
  (``offset_commits.COMMITS_SCHEMA``), decoded in the scan tasks. ``batches`` returns one
  row per batch from its header (``batch_headers.BATCHES_SCHEMA``: offsets, record count,
  producer, transactional/control bits, a control record's type); data records are not
  decoded (the transactions audit reads it).
- ``batchRows``: rows per Arrow batch (default 65536).
- ``maxPartitionBytes`` (default 134217728 = 128 MiB, ``spark.sql.files.maxPartitionBytes``'s
  default), ``openCostInBytes`` (default 4194304 = 4 MiB) and ``minPartitionNum`` (default 1;
  :func:`kafkasim.spark_jobs.common.read_log` passes the session's default parallelism and
  its ``spark.sql.files.*`` settings): the input is planned as Spark's file sources plan
  files (:mod:`kafkasim.spark_jobs.splits`): small segments share a task up to the split
  size, and a segment bigger than it is cut at batch boundaries found through its offset
  index, so one 1 GiB segment is read by several tasks. ``maxPartitionBytes=0``: one
  input partition per segment file.

Columns: Python data sources get no column pruning from Spark, so a reader that needs
only some columns says so with a user schema that is a subset of ``SCHEMA`` (any order,
same names — lower case, as listed — and types): ``.schema("partition int, key binary")`` or
``.schema(schema_of([...]))``. Only those columns are built and sent to the JVM. A column
that is not in ``SCHEMA``, or has another type, is an ``InvalidArgumentError`` naming it.

Invariants: every row comes from a batch whose header checks and CRC passed and whose
offsets pass the checks of storage/FORMAT.md §2.4 (inside the segment's range, increasing,
contiguous in a segment compaction never touched: ``base_offset`` lies outside the CRC) —
the walk is the shared ``kafkasim.records.framing.BatchIterator``; within one segment rows
are in offset order. No offset is skipped silently: a corrupt batch, or a never-compacted
segment whose batches end short of the next segment's base offset (a file cut at a batch
boundary), is reported like a CRC error (``corrupt=report``/``fail``, ``mode=corruption``).

Thread-safety: the reader is immutable once planned and pickled to workers; each
``read`` call owns its file handle.
"""

from __future__ import annotations

import logging
import warnings
from typing import Iterator, Optional

import pyarrow as pa
from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition

from kafkasim.errors import CorruptRecordError, InvalidArgumentError
from kafkasim.spark_jobs import batch_headers, offset_commits, partials, splits
from kafkasim.spark_jobs.arrow_rows import _ARROW_SCHEMA, _Columns
from kafkasim.spark_jobs.logdir import LogDir, SegmentRef
from kafkasim.records import record_batch as rb
from kafkasim.records.control import read_control_batch
from kafkasim.records.columns import ArrowColumnBuilder
from kafkasim.records.framing import BatchIterator

__all__ = ["KafkasimDataSource", "read_local_table", "planned_tasks", "SCHEMA", "CORRUPTION_SCHEMA", "CorruptBatchWarning",
           "register", "scan_corruption", "read_segment_arrow", "scan_segment_corruption", "schema_of"]

log = logging.getLogger(__name__)

SCHEMA = ("topic string, partition int, offset long, timestamp long, key binary, value binary, "
          "headers array<struct<key:string,value:binary>>, producer_id long, producer_epoch int, "
          "sequence int, batch_base_offset long, segment string")
CORRUPTION_SCHEMA = ("topic string, partition int, segment string, position long, "
                     "skipped_bytes long, error string")

_HEADERS_DDL = "array<struct<key:string,value:binary>>"
_COLUMNS = [tuple(part.strip().replace("HEADERS", _HEADERS_DDL).split(" ", 1))
            for part in SCHEMA.replace(_HEADERS_DDL, "HEADERS").split(",")]   # [(name, type)]
_COLUMN_TYPES = dict(_COLUMNS)
_CORRUPTION_COLUMNS = [part.strip().split(" ")[0] for part in CORRUPTION_SCHEMA.split(",")]

_NO_END = 2 ** 63 - 1
_MODES = ("records", "corruption", "partials", "commits", "batches")


class CorruptBatchWarning(UserWarning):
    """Warned (and logged) when a corrupt batch is skipped under ``corrupt=report``."""


class _Options:
    """Parsed, validated options (plain data, picklable)."""

    def __init__(self, options) -> None:
        self.path = options.get("path")
        if not self.path:
            raise InvalidArgumentError('the kafkasim data source needs a path: .load("DATA_DIR")')
        raw = options.get("topics") or options.get("topic")
        self.topics = {t.strip() for t in raw.split(",") if t.strip()} if raw else None
        self.start_offset = self._int(options, "startingOffset", 0)
        self.end_offset = self._int(options, "endingOffset", _NO_END)
        self.start_ts = self._int(options, "startingTimestamp", -(2 ** 63))
        self.end_ts = self._int(options, "endingTimestamp", _NO_END)
        self.corrupt = (options.get("corrupt") or "report").lower()
        if self.corrupt not in ("report", "fail"):
            raise InvalidArgumentError(f"corrupt must be 'report' or 'fail', got {self.corrupt!r}")
        self.mode = (options.get("mode") or "records").lower()
        if self.mode not in _MODES:
            raise InvalidArgumentError(f"mode must be one of {', '.join(_MODES)}; got {self.mode!r}")
        self.spec = partials.Spec.from_json(options.get("partials")) if self.mode == "partials" else None
        self.columns = [n for n, _ in _COLUMNS]   # set from the read schema by DataSource.reader
        self.batch_rows = self._int(options, "batchRows", 65536)
        if self.batch_rows < 1:
            raise InvalidArgumentError(f"batchRows must be >= 1, got {self.batch_rows}")
        self.max_partition_bytes = self._int(options, "maxPartitionBytes", splits.MAX_PARTITION_BYTES)
        self.open_cost = self._int(options, "openCostInBytes", splits.OPEN_COST_BYTES)
        self.min_partitions = self._int(options, "minPartitionNum", 1)
        for name, v, least in (("maxPartitionBytes", self.max_partition_bytes, 0),
                               ("openCostInBytes", self.open_cost, 0), ("minPartitionNum", self.min_partitions, 1)):
            if v < least:
                raise InvalidArgumentError(f"{name} must be >= {least}, got {v}")

    @staticmethod
    def _int(options, name: str, default: int) -> int:
        raw = options.get(name)
        if raw is None or raw == "":
            return default
        try:
            return int(raw)
        except ValueError:
            raise InvalidArgumentError(f"option {name} must be an integer, got {raw!r}") from None

    @property
    def filters_records(self) -> bool:
        return (self.start_offset > 0 or self.end_offset < _NO_END
                or self.start_ts > -(2 ** 63) or self.end_ts < _NO_END)


class _SegmentPartition(InputPartition):
    """Pieces of segments (``splits.Piece``), read in order."""

    def __init__(self, pieces: list) -> None:
        super().__init__(pieces[0].seg.path)
        self.pieces = pieces


class KafkasimDataSource(DataSource):
    """``spark.read.format("kafkasim")``: records of a kafkasim data dir (see module doc)."""

    @classmethod
    def name(cls) -> str:
        return "kafkasim"

    def schema(self):
        opts = _Options(self.options)
        return {"corruption": CORRUPTION_SCHEMA, "partials": partials.PARTIALS_SCHEMA,
                "commits": offset_commits.COMMITS_SCHEMA,
                "batches": batch_headers.BATCHES_SCHEMA}.get(opts.mode, SCHEMA)

    def reader(self, schema):
        opts = _Options(self.options)
        if opts.mode == "records":
            opts.columns = _requested_columns(schema)
        elif opts.mode == "partials":
            if [f.name for f in schema.fields] != [f.name for f in partials.ARROW_SCHEMA]:
                raise InvalidArgumentError("mode partials reads PARTIALS_SCHEMA; a user schema cannot change it")
            opts.columns = list(partials.READ_COLUMNS)
        elif opts.mode == "commits":
            if [f.name for f in schema.fields] != [f.name for f in offset_commits.ARROW_SCHEMA]:
                raise InvalidArgumentError("mode commits reads COMMITS_SCHEMA; a user schema cannot change it")
            opts.columns = list(offset_commits.READ_COLUMNS)
        elif opts.mode == "batches":
            if [f.name for f in schema.fields] != [f.name for f in batch_headers.ARROW_SCHEMA]:
                raise InvalidArgumentError("mode batches reads BATCHES_SCHEMA; a user schema cannot change it")
        elif [f.name for f in schema.fields] != _CORRUPTION_COLUMNS:
            raise InvalidArgumentError(f"mode corruption reads CORRUPTION_SCHEMA ({CORRUPTION_SCHEMA}); "
                                       f"a user schema cannot change it")
        return _Reader(opts)


def schema_of(columns) -> str:
    """DDL of a subset of ``SCHEMA``, in the given order, for ``.schema(...)``: a reader
    given it builds and sends only those columns.

    Example: ``spark.read.format("kafkasim").schema(schema_of(["partition", "key"])).load(d)``
    """
    if not columns:
        raise InvalidArgumentError("schema_of needs at least one column")
    missing = [c for c in columns if c not in _COLUMN_TYPES]
    if missing:
        raise _no_such_column(missing[0])
    return ", ".join(f"{c} {_COLUMN_TYPES[c]}" for c in columns)


def _no_such_column(name: str) -> InvalidArgumentError:
    return InvalidArgumentError(f"the kafkasim data source has no column {name!r}; its columns: "
                                f"{', '.join(n for n, _ in _COLUMNS)}")


def _requested_columns(schema) -> list[str]:
    """Column names of ``schema``: ``SCHEMA`` itself, or a user-specified subset of it
    (``.schema("partition int, key binary")``: only those columns are built and sent)."""
    names = []
    for field in schema.fields:
        want = _COLUMN_TYPES.get(field.name)
        if want is None:
            raise _no_such_column(field.name)
        got = field.dataType.simpleString()
        if got.replace("bigint", "long") != want:
            raise InvalidArgumentError(f"column {field.name!r} is {want} in the kafkasim data source, "
                                       f"not {got}")
        names.append(field.name)
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise InvalidArgumentError(f"column {twice[0]!r} is named twice in the schema")
    if not names:
        raise InvalidArgumentError("the schema selects no columns; name at least one of "
                                   f"{', '.join(n for n, _ in _COLUMNS)}")
    return names


class _Reader(DataSourceReader):
    def __init__(self, opts: _Options) -> None:
        self.opts = opts
        self.logdir = LogDir(opts.path)

    def partitions(self):
        o = self.opts
        segs = [s for s in self.logdir.segments(o.topics)
                if (s.size > 0 or _missing_offsets(s, s.base_offset) is not None)
                and s.base_offset < o.end_offset and (s.end_offset is None or s.end_offset > o.start_offset)]
        tasks = splits.plan(self.logdir, segs, o.max_partition_bytes, o.open_cost, o.min_partitions,
                            cut=o.mode != "corruption")   # the corruption scan reads whole segments
        # Spark needs at least one partition; an empty one reads nothing.
        return [_SegmentPartition(t) for t in tasks] or [InputPartition(None)]

    def read(self, partition):
        pieces = getattr(partition, "pieces", ())
        if self.opts.mode == "corruption":
            return (row for p in pieces for row in _corruption_batches(self.logdir, p.seg))
        if self.opts.mode == "partials":
            return partials.partials_of_pieces(_by_partition(self.logdir, pieces, self.opts), self.opts.spec)
        if self.opts.mode == "commits":
            return offset_commits.commit_batches(
                batch for p in pieces for batch in read_segment_arrow(self.logdir, p.seg, self.opts, p))
        if self.opts.mode == "batches":
            return (batch for p in pieces for batch in read_segment_headers(self.logdir, p.seg, self.opts, p))
        return (batch for p in pieces for batch in read_segment_arrow(self.logdir, p.seg, self.opts, p))


def _by_partition(logdir: LogDir, pieces, opts: "_Options"):
    """``(topic, partition, [record batches])`` per run of consecutive pieces of one partition."""
    run, key = [], None
    for p in pieces:
        k = (p.seg.topic, p.seg.partition)
        if k != key and run:
            yield key[0], key[1], run
            run = []
        key = k
        run.extend(read_segment_arrow(logdir, p.seg, opts, p))
    if run:
        yield key[0], key[1], run


def _report(seg: SegmentRef, pos: int, exc: Exception, end: Optional[int] = None) -> None:
    rest = ("the rest of the segment" if end is None or end >= seg.size
            else f"up to position {end} (the next batch boundary the offset index vouches for)")
    msg = f"corrupt data in {seg.path} at position {pos}, {rest} skipped: {exc}"
    log.warning(msg)
    warnings.warn(msg, CorruptBatchWarning, stacklevel=2)


def _iter_valid_batches(buf, seg: SegmentRef, on_corrupt, want=None,
                        builder: Optional[ArrowColumnBuilder] = None,
                        piece: Optional[splits.Piece] = None) -> Iterator[tuple[int, rb.BatchHeader]]:
    """Yield ``(pos, header)`` of each valid batch; call ``on_corrupt(pos, exc)`` at the
    first corrupt one and stop (the rest of the segment is skipped, FORMAT.md §5).

    The walk is the shared :class:`kafkasim.records.framing.BatchIterator` (header, CRC and
    offset checks, FORMAT.md §2.4); this reader's policy is what it does where that walk
    stops. A batch is valid when its header, CRC and offsets check out and, with a
    ``builder``, its records decode: they are then added to ``builder`` before the batch is
    yielded. Batches for which ``want(header)`` is false are checked (header, CRC, offsets)
    but their records are not decoded, and they are not yielded. A contiguous segment whose
    batches end short of the next segment is reported at its end (``on_corrupt(size, exc)``).
    """
    piece = piece or splits.whole(seg)
    batches = BatchIterator(buf, piece.start, piece.end, where=seg.path, first_offset=piece.first_offset,
                            end_offset=piece.end_offset, contiguous=seg.contiguous)
    for pos, h in batches:
        wanted = want is None or want(h)
        if wanted and builder is not None:
            try:
                builder.add(buf, pos, h, where=seg.path)
            except CorruptRecordError as exc:
                batches.reject(exc)
                break
        if wanted:
            yield pos, h
    if batches.error is not None:
        on_corrupt(batches.position, batches.error)
    else:
        missing = _missing_offsets(seg, batches.next_offset, piece)
        if missing is not None:
            on_corrupt(batches.position, missing)


def _missing_offsets(seg: SegmentRef, next_offset: int,
                     piece: Optional[splits.Piece] = None) -> Optional[CorruptRecordError]:
    """The error for a contiguous segment (or piece of one) whose batches end (at
    ``next_offset``) short of where the next segment (piece) starts — offsets lost without
    a trace in the file — or None."""
    end_offset = seg.end_offset if piece is None else piece.end_offset
    end = seg.size if piece is None else piece.end
    if not seg.contiguous or end_offset is None or next_offset >= end_offset:
        return None
    nxt = "segment" if end >= seg.size else "piece (offset index entry)"
    return CorruptRecordError(
        f"{seg.path}: the batches end at position {end} with offset {next_offset - 1}, but the next "
        f"{nxt} starts at offset {end_offset}: offsets {next_offset}..{end_offset - 1} are missing")


_FLUSH_BYTES = 256 << 20   # Arrow binary columns hold < 2 GiB; flush well before


def _policy(seg: SegmentRef, opts: _Options, piece: Optional[splits.Piece]):
    """``(on_corrupt, want)`` of a segment read under ``opts``: what a corrupt batch does
    (``corrupt=fail`` raises, ``report`` logs and warns), and which batches the offset and
    time options keep."""
    def on_corrupt(pos, exc):
        if opts.corrupt == "fail":
            raise exc
        _report(seg, pos, exc, None if piece is None else piece.end)

    def want(h: rb.BatchHeader) -> bool:
        return (h.next_offset > opts.start_offset and h.base_offset < opts.end_offset
                and h.max_timestamp >= opts.start_ts)

    return on_corrupt, want


def read_segment_arrow(logdir: LogDir, seg: SegmentRef, opts: _Options,
                       piece: Optional[splits.Piece] = None) -> Iterator[pa.RecordBatch]:
    """Decode one segment (or one ``piece`` of it) into Arrow batches with ``SCHEMA`` (the
    data source's ``read``)."""
    on_corrupt, want = _policy(seg, opts, piece)
    cols = _Columns(seg)
    with logdir.open_segment(seg.path) as buf:
        for _pos, h in _iter_valid_batches(buf, seg, on_corrupt, want, cols.builder, piece):
            cols.added(h)
            if cols.builder.rows >= opts.batch_rows or cols.builder.nbytes >= _FLUSH_BYTES:
                yield cols.flush(opts)
    if cols.builder.rows:
        yield cols.flush(opts)


def read_segment_headers(logdir: LogDir, seg: SegmentRef, opts: _Options,
                         piece: Optional[splits.Piece] = None) -> Iterator[pa.RecordBatch]:
    """One row per valid batch of one segment (or ``piece``), ``batch_headers.BATCHES_SCHEMA``
    (``mode=batches``): records of data batches are not decoded; a control batch's record is.
    A control record that does not decode is corrupt data (``opts.corrupt``), its batch kept
    with a null ``control_type``."""
    on_corrupt, want = _policy(seg, opts, piece)
    rows = batch_headers.BatchRows(seg.topic, seg.partition)
    with logdir.open_segment(seg.path) as buf:
        for pos, h in _iter_valid_batches(buf, seg, on_corrupt, want, None, piece):
            ctype = epoch = None
            if h.attributes & rb.ATTR_CONTROL:
                try:
                    got = read_control_batch(buf, pos, h, where=seg.path)
                except CorruptRecordError as exc:
                    on_corrupt(pos, exc)
                    got = None
                if got is not None:
                    ctype, epoch = got[0].type, (got[1].coordinator_epoch if got[1] else None)
            rows.add(h, ctype, epoch)
            if len(rows) >= opts.batch_rows:
                yield rows.flush()
    if len(rows):
        yield rows.flush()


def scan_segment_corruption(logdir: LogDir, seg: SegmentRef) -> list[dict]:
    """Corrupt batches of one segment: header, CRC and record checks, as the reader does."""
    found = []

    def on_corrupt(pos, exc):
        found.append({"topic": seg.topic, "partition": seg.partition, "segment": seg.path,
                      "position": pos, "skipped_bytes": seg.size - pos, "error": str(exc)})

    builder = ArrowColumnBuilder()   # decodes every record, as the reader would; rows dropped
    with logdir.open_segment(seg.path) as buf:
        for _ in _iter_valid_batches(buf, seg, on_corrupt, builder=builder):
            if builder.rows >= 65536:
                builder.take()
    return found


def _corruption_batches(logdir: LogDir, seg: SegmentRef) -> Iterator[tuple]:
    for row in scan_segment_corruption(logdir, seg):
        yield (row["topic"], row["partition"], row["segment"], row["position"],
               row["skipped_bytes"], row["error"])


def read_local_table(path: str, topics: Optional[list] = None, columns: Optional[list] = None,
                     corrupt: str = "report", **options) -> pa.Table:
    """The rows the data source would give for ``path`` (same options, same reader
    function, same order as a scan of the tasks in sequence), decoded in this process into
    one pyarrow Table: for a small local log, where starting Python workers for a scan
    costs more than the scan (``common.read_log`` uses it below ``LOCAL_SCAN_BYTES``)."""
    raw = {"path": path, "corrupt": corrupt, **{k: str(v) for k, v in options.items() if v is not None}}
    if topics:
        raw["topics"] = ",".join(topics)
    opts = _Options(raw)
    if opts.mode == "partials":
        opts.columns, schema = list(partials.READ_COLUMNS), partials.ARROW_SCHEMA
    elif opts.mode == "commits":
        opts.columns, schema = list(offset_commits.READ_COLUMNS), offset_commits.ARROW_SCHEMA
    elif opts.mode == "batches":
        schema = batch_headers.ARROW_SCHEMA
    else:
        opts.columns = list(columns) if columns else [n for n, _ in _COLUMNS]
        schema = pa.schema([_ARROW_SCHEMA.field(n) for n in opts.columns])
    reader = _Reader(opts)
    batches = [b for part in reader.partitions() for b in reader.read(part)
               if b.num_rows]        # PySpark's createDataFrame stops at an empty batch
    return pa.Table.from_batches(batches, schema=schema)


def planned_tasks(path: str, topics: Optional[list] = None, **options) -> list[list]:
    """The scan's plan for these options: per task, its pieces (``splits.Piece``) in order."""
    raw = {"path": path, **{k: str(v) for k, v in options.items() if v is not None}}
    if topics:
        raw["topics"] = ",".join(topics)
    return [list(t.pieces) for t in _Reader(_Options(raw)).partitions() if hasattr(t, "pieces")]


def register(spark) -> None:
    """Register the ``kafkasim`` format on ``spark`` (build_session does this)."""
    spark.dataSource.register(KafkasimDataSource)


def scan_corruption(spark, path: str, topics: Optional[list[str]] = None) -> list[dict]:
    """Every corrupt batch under ``path`` as dicts (``CORRUPTION_SCHEMA`` fields), sorted by
    topic, partition, segment and position. Runs as a Spark job, one task per segment."""
    reader = spark.read.format("kafkasim").option("mode", "corruption")
    if topics:
        reader = reader.option("topics", ",".join(topics))
    rows = reader.load(path).orderBy("topic", "partition", "segment", "position").collect()
    return [r.asDict() for r in rows]
