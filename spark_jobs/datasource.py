"""A Spark data source over kafkasim's on-disk log: ``spark.read.format("kafkasim").load(DIR)``.

Built on PySpark 4's Python data source API. The driver lists segment files
(:mod:`spark_jobs.logdir`); there is **one input partition per segment file**; each
task decodes its segment with ``storage.record_batch`` (the one reader of the format)
and yields pyarrow ``RecordBatch``es of up to ``batchRows`` rows.

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
  logged (logger ``spark_jobs.datasource``) and warned (``CorruptBatchWarning``) with
  file and byte position, and the rest of that segment is skipped (the length field of
  a corrupt batch cannot be trusted; FORMAT.md §5); it never becomes a row.
  ``fail``: the task raises ``CorruptRecordError`` naming file and position.
- ``mode``: ``records`` (default) or ``corruption``. ``corruption`` returns one row per
  corrupt batch found instead of records, with ``CORRUPTION_SCHEMA``
  (``topic, partition, segment, position, skipped_bytes, error``): the countable side
  of ``corrupt=report``. :func:`scan_corruption` wraps it.
- ``batchRows``: rows per Arrow batch (default 65536).

Invariants: every row comes from a batch whose header checks and CRC passed
(``storage.record_batch.iter_batches``); within one segment rows are in offset order.

Thread-safety: the reader is immutable once planned and pickled to workers; each
``read`` call owns its file handle.
"""

from __future__ import annotations

import logging
import warnings
from typing import Iterator, Optional

import numpy as np
import pyarrow as pa
from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition

from kafkasim.errors import CorruptRecordError, InvalidArgumentError
from spark_jobs.logdir import LogDir, SegmentRef
from storage import record_batch as rb

__all__ = ["KafkasimDataSource", "SCHEMA", "CORRUPTION_SCHEMA", "CorruptBatchWarning",
           "register", "scan_corruption", "read_segment_arrow", "scan_segment_corruption"]

log = logging.getLogger(__name__)

SCHEMA = ("topic string, partition int, offset long, timestamp long, key binary, value binary, "
          "headers array<struct<key:string,value:binary>>, producer_id long, producer_epoch int, "
          "sequence int, batch_base_offset long, segment string")
CORRUPTION_SCHEMA = ("topic string, partition int, segment string, position long, "
                     "skipped_bytes long, error string")

_HEADER_TYPE = pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())]))
_ARROW_SCHEMA = pa.schema([
    ("topic", pa.string()), ("partition", pa.int32()), ("offset", pa.int64()),
    ("timestamp", pa.int64()), ("key", pa.binary()), ("value", pa.binary()),
    ("headers", _HEADER_TYPE), ("producer_id", pa.int64()), ("producer_epoch", pa.int32()),
    ("sequence", pa.int32()), ("batch_base_offset", pa.int64()), ("segment", pa.string()),
])
_NO_END = 2 ** 63 - 1


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
        if self.mode not in ("records", "corruption"):
            raise InvalidArgumentError(f"mode must be 'records' or 'corruption', got {self.mode!r}")
        self.batch_rows = self._int(options, "batchRows", 65536)
        if self.batch_rows < 1:
            raise InvalidArgumentError(f"batchRows must be >= 1, got {self.batch_rows}")

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
    def __init__(self, seg: SegmentRef) -> None:
        super().__init__(seg.path)
        self.seg = seg


class KafkasimDataSource(DataSource):
    """``spark.read.format("kafkasim")``: records of a kafkasim data dir (see module doc)."""

    @classmethod
    def name(cls) -> str:
        return "kafkasim"

    def schema(self):
        opts = _Options(self.options)
        return CORRUPTION_SCHEMA if opts.mode == "corruption" else SCHEMA

    def reader(self, schema):
        return _Reader(_Options(self.options))


class _Reader(DataSourceReader):
    def __init__(self, opts: _Options) -> None:
        self.opts = opts
        self.logdir = LogDir(opts.path)

    def partitions(self):
        o = self.opts
        segs = [s for s in self.logdir.segments(o.topics)
                if s.size > 0 and s.base_offset < o.end_offset
                and (s.end_offset is None or s.end_offset > o.start_offset)]
        # Spark needs at least one partition; an empty one reads nothing.
        return [_SegmentPartition(s) for s in segs] or [InputPartition(None)]

    def read(self, partition):
        seg = getattr(partition, "seg", None)
        if seg is None:
            return iter(())
        if self.opts.mode == "corruption":
            return _corruption_batches(self.logdir, seg)
        return read_segment_arrow(self.logdir, seg, self.opts)


def _report(seg: SegmentRef, pos: int, exc: Exception) -> None:
    msg = f"skipping corrupt batch in {seg.path} at position {pos}: {exc}"
    log.warning(msg)
    warnings.warn(msg, CorruptBatchWarning, stacklevel=2)


def _iter_valid_batches(buf, seg: SegmentRef, on_corrupt, want=None) -> Iterator[tuple[int, rb.BatchHeader, tuple]]:
    """Yield ``(pos, header, columns)`` (storage.record_batch.decode_columns) of each valid batch; call ``on_corrupt(pos, exc)``
    at the first corrupt one and stop (the rest of the segment is skipped, FORMAT.md §5).

    Batches for which ``want(header)`` is false are checked (header and CRC) but their
    records are not decoded, and they are not yielded.
    """
    pos, end = 0, len(buf)
    while pos < end:
        try:
            h = rb.decode_header(buf, pos, where=seg.path)
            rb.verify(buf, pos, h, where=seg.path)
            body = rb.decode_columns(buf, pos, h, where=seg.path) if want is None or want(h) else None
        except CorruptRecordError as exc:
            on_corrupt(pos, exc)
            return
        if body is not None and body[0]:
            yield pos, h, body
        pos += h.size


def read_segment_arrow(logdir: LogDir, seg: SegmentRef, opts: _Options) -> Iterator[pa.RecordBatch]:
    """Decode one segment into Arrow batches with ``SCHEMA`` (the data source's ``read``)."""
    def on_corrupt(pos, exc):
        if opts.corrupt == "fail":
            raise exc
        _report(seg, pos, exc)

    def want(h: rb.BatchHeader) -> bool:
        return (h.next_offset > opts.start_offset and h.base_offset < opts.end_offset
                and h.max_timestamp >= opts.start_ts)

    cols = _Columns(seg)
    with logdir.open_segment(seg.path) as buf:
        for _pos, h, body in _iter_valid_batches(buf, seg, on_corrupt, want):
            cols.add(h, body)
            if cols.rows >= opts.batch_rows:
                yield cols.flush(opts)
    if cols.rows:
        yield cols.flush(opts)


class _Columns:
    """Column builders for one segment: raw records in, one Arrow batch out."""

    def __init__(self, seg: SegmentRef) -> None:
        self.seg = seg
        self._topic = pa.array([seg.topic], pa.string())
        self._segment = pa.array([seg.path], pa.string())
        self._reset()

    def _reset(self) -> None:
        self.rows = 0
        self.deltas, self.tsds, self.keys, self.values, self.headers = [], [], [], [], []
        self.batch_info = []  # (count, base_offset, base_ts, pid, epoch, base_seq)

    def add(self, h: rb.BatchHeader, columns: tuple) -> None:
        deltas, tsds, keys, values, headers = columns   # storage.record_batch.decode_columns
        n = len(deltas)
        if deltas[-1] == n - 1:  # not compacted: deltas are 0..n-1
            self.deltas.append(np.arange(n, dtype=np.int64))
        else:
            self.deltas.append(np.array(deltas, dtype=np.int64))
        self.tsds.append(tsds)
        self.keys.extend(keys)
        self.values.extend(values)
        self.headers.extend(headers)
        self.batch_info.append((n, h.base_offset, h.base_timestamp, h.producer_id,
                                h.producer_epoch, h.base_sequence))
        self.rows += n

    def flush(self, opts: _Options) -> pa.RecordBatch:
        n = self.rows
        info = np.array(self.batch_info, dtype=np.int64).reshape(-1, 6)
        counts = info[:, 0]
        rep = lambda col: np.repeat(info[:, col], counts)  # noqa: E731
        deltas = np.concatenate(self.deltas)
        tsds = np.concatenate([np.array(t, dtype=np.int64) for t in self.tsds])
        base = rep(1)
        offsets = base + deltas
        timestamps = rep(2) + tsds
        seq0 = rep(5)
        sequence = np.where(seq0 >= 0, seq0 + deltas, -1).astype(np.int32)
        zeros = np.zeros(n, dtype=np.int32)
        batch = pa.RecordBatch.from_arrays([
            self._topic.take(zeros),
            pa.array(np.full(n, self.seg.partition, dtype=np.int32)),
            pa.array(offsets),
            pa.array(timestamps),
            _binary_array(self.keys),
            _binary_array(self.values),
            _headers_array(self.headers),
            pa.array(rep(3)),
            pa.array(rep(4).astype(np.int32)),
            pa.array(sequence),
            pa.array(base),
            self._segment.take(zeros),
        ], schema=_ARROW_SCHEMA)
        if opts.filters_records:
            mask = ((offsets >= opts.start_offset) & (offsets < opts.end_offset)
                    & (timestamps >= opts.start_ts) & (timestamps < opts.end_ts))
            if not mask.all():
                batch = batch.filter(pa.array(mask))
        self._reset()
        return batch


def _binary_array(values: list) -> pa.Array:
    # pa.array with type inference is ~15x faster than with an explicit pa.binary() type here.
    arr = pa.array(values)
    if arr.type != pa.binary():
        arr = arr.cast(pa.binary()) if len(arr) and arr.null_count < len(arr) else pa.nulls(len(values), pa.binary())
    return arr


def _headers_array(headers: list) -> pa.Array:
    n = len(headers)
    if not any(headers):
        return pa.ListArray.from_arrays(pa.array(np.zeros(n + 1, dtype=np.int32)),
                                        _EMPTY_HEADER_STRUCT).cast(_HEADER_TYPE)
    offsets = np.zeros(n + 1, dtype=np.int32)
    np.cumsum(np.fromiter(map(len, headers), dtype=np.int32, count=n), out=offsets[1:])
    pairs = [pair for h in headers if h for pair in h]
    struct = pa.StructArray.from_arrays(
        [pa.array([p[0] for p in pairs], pa.string()), _binary_array([p[1] for p in pairs])],
        names=["key", "value"])
    return pa.ListArray.from_arrays(pa.array(offsets), struct).cast(_HEADER_TYPE)


_EMPTY_HEADER_STRUCT = pa.StructArray.from_arrays(
    [pa.array([], pa.string()), pa.array([], pa.binary())], names=["key", "value"])


def scan_segment_corruption(logdir: LogDir, seg: SegmentRef) -> list[dict]:
    """Corrupt batches of one segment: header, CRC and record checks, as the reader does."""
    found = []

    def on_corrupt(pos, exc):
        found.append({"topic": seg.topic, "partition": seg.partition, "segment": seg.path,
                      "position": pos, "skipped_bytes": seg.size - pos, "error": str(exc)})

    with logdir.open_segment(seg.path) as buf:
        for _ in _iter_valid_batches(buf, seg, on_corrupt):
            pass
    return found


def _corruption_batches(logdir: LogDir, seg: SegmentRef) -> Iterator[tuple]:
    for row in scan_segment_corruption(logdir, seg):
        yield (row["topic"], row["partition"], row["segment"], row["position"],
               row["skipped_bytes"], row["error"])


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
