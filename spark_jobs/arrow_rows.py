"""One segment's records on their way to Arrow: the data source's row builder.

:class:`_Columns` takes the records of verified batches from
``kafkasim.records.columns.ArrowColumnBuilder`` (decoded straight into Arrow buffers, no
Python object per record on its C path), keeps each batch header's fields, and flushes
pyarrow ``RecordBatch``es of the requested columns of ``datasource.SCHEMA``
(``_ARROW_SCHEMA``), header fields repeated per row with numpy, offset and time filters
applied. Used by ``datasource.read_segment_arrow`` only.

Not thread-safe: one builder per segment read.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from kafkasim.records import record_batch as rb
from kafkasim.records.columns import ArrowColumnBuilder
from kafkasim.spark_jobs.logdir import SegmentRef

__all__ = ["_Columns", "_ARROW_SCHEMA", "_HEADER_TYPE"]

_HEADER_TYPE = pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())]))
_ARROW_SCHEMA = pa.schema([
    ("topic", pa.string()), ("partition", pa.int32()), ("offset", pa.int64()),
    ("timestamp", pa.int64()), ("key", pa.binary()), ("value", pa.binary()),
    ("headers", _HEADER_TYPE), ("producer_id", pa.int64()), ("producer_epoch", pa.int32()),
    ("sequence", pa.int32()), ("batch_base_offset", pa.int64()), ("segment", pa.string()),
])


class _Columns:
    """One segment's rows on their way to Arrow: records decoded straight into Arrow
    buffers by ``kafkasim.records.columns.ArrowColumnBuilder`` (no Python object per record
    on its C path), batch-header fields kept per batch and repeated per row with numpy."""

    def __init__(self, seg: SegmentRef) -> None:
        self.seg = seg
        self._topic = pa.array([seg.topic], pa.string())
        self._segment = pa.array([seg.path], pa.string())
        self.builder = ArrowColumnBuilder()
        self._info: list = []  # (rows added, base_offset, base_ts, pid, epoch, base_seq) per batch
        self._counted = 0

    def added(self, h: rb.BatchHeader) -> None:
        """Note the header of the batch ``builder`` just took in."""
        n = self.builder.rows - self._counted
        self._counted = self.builder.rows
        if n:
            self._info.append((n, h.base_offset, h.base_timestamp, h.producer_id, h.producer_epoch, h.base_sequence))

    def flush(self, opts) -> pa.RecordBatch:
        c = self.builder.take()
        n = c["rows"]
        info = np.array(self._info, dtype=np.int64).reshape(-1, 6)
        self._info, self._counted = [], 0
        counts = info[:, 0]
        rep = lambda col: np.repeat(info[:, col], counts)  # noqa: E731
        deltas = np.frombuffer(c["offset_deltas"], dtype=np.int64)
        base = rep(1)
        offsets = base + deltas
        timestamps = rep(2) + np.frombuffer(c["timestamp_deltas"], dtype=np.int64)
        build = {   # only the requested columns are built
            "topic": lambda: self._topic.take(np.zeros(n, dtype=np.int32)),
            "partition": lambda: pa.array(np.full(n, self.seg.partition, dtype=np.int32)),
            "offset": lambda: pa.array(offsets),
            "timestamp": lambda: pa.array(timestamps),
            "key": lambda: _blob_array(pa.binary(), n, c["keys"]),
            "value": lambda: _blob_array(pa.binary(), n, c["values"]),
            "headers": lambda: _headers_array(n, c),
            "producer_id": lambda: pa.array(rep(3)),
            "producer_epoch": lambda: pa.array(rep(4).astype(np.int32)),
            "sequence": lambda: _sequences(rep(5), deltas),
            "batch_base_offset": lambda: pa.array(base),
            "segment": lambda: self._segment.take(np.zeros(n, dtype=np.int32)),
        }
        names = opts.columns
        batch = pa.RecordBatch.from_arrays([build[name]() for name in names],
                                           schema=pa.schema([_ARROW_SCHEMA.field(name) for name in names]))
        if opts.filters_records:
            mask = ((offsets >= opts.start_offset) & (offsets < opts.end_offset)
                    & (timestamps >= opts.start_ts) & (timestamps < opts.end_ts))
            if not mask.all():
                batch = batch.filter(pa.array(mask))
        return batch


def _sequences(base_sequence: np.ndarray, deltas: np.ndarray) -> pa.Array:
    """Per-record producer sequence: base + delta (wrapping past 2**31 - 1 to 0, as Kafka's
    ``DefaultRecordBatch.incrementSequence``), or -1 where the batch has none."""
    return pa.array(np.where(base_sequence >= 0, (base_sequence + deltas) & 0x7FFFFFFF, -1).astype(np.int32))


def _blob_array(typ: pa.DataType, n: int, buffers: tuple) -> pa.Array:
    """A binary/string array from ``ArrowColumnBuilder`` buffers ``(validity, offsets, data, nulls)``."""
    validity, offsets, data, nulls = buffers
    return pa.Array.from_buffers(typ, n, [pa.py_buffer(validity) if validity is not None else None,
                                          pa.py_buffer(offsets), pa.py_buffer(data)], null_count=nulls)


def _headers_array(n: int, c: dict) -> pa.Array:
    m = len(c["header_keys"][1]) // 4 - 1
    struct = pa.StructArray.from_arrays([_blob_array(pa.string(), m, c["header_keys"]),
                                         _blob_array(pa.binary(), m, c["header_values"])],
                                        fields=list(_HEADER_TYPE.value_type))
    return pa.Array.from_buffers(_HEADER_TYPE, n, [None, pa.py_buffer(c["header_offsets"])], children=[struct])
