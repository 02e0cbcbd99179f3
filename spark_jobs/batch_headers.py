"""Batch headers as rows: the kafkasim data source's ``mode=batches`` (the transactions audit reads it).

One row per verified batch (header and CRC checked, offsets checked as in ``mode=records``),
built from the 61-byte header alone: the records of a data batch are not decoded. A control
batch's one record is (``kafkasim.records.control.read_control_batch``): its type (ABORT 0,
COMMIT 1, another Kafka control type, ``-1`` unknown; null when the cleaner emptied the batch)
and, for COMMIT/ABORT, the coordinator epoch of the marker. Schema (``BATCHES_SCHEMA``)::

    topic string, partition int,
    base_offset long, last_offset long, records int        -- the header's record count
    first_timestamp long      -- the batch's base timestamp (its max timestamp when the
                                 delete-horizon bit says the base holds the horizon)
    max_timestamp long, producer_id long, producer_epoch int,
    transactional boolean, control boolean,                -- attributes 0x10, 0x20
    control_type int, coordinator_epoch int                -- control batches only, else null

Rows of one segment come in offset order. Pure functions over header tuples; thread-safe.
"""

from __future__ import annotations

from typing import Optional

import pyarrow as pa

from kafkasim.records.framing import ATTR_CONTROL, ATTR_DELETE_HORIZON, ATTR_TRANSACTIONAL, BatchHeader

__all__ = ["BATCHES_SCHEMA", "ARROW_SCHEMA", "BatchRows"]

BATCHES_SCHEMA = ("topic string, partition int, base_offset long, last_offset long, records int, "
                  "first_timestamp long, max_timestamp long, producer_id long, producer_epoch int, "
                  "transactional boolean, control boolean, control_type int, coordinator_epoch int")
ARROW_SCHEMA = pa.schema([
    ("topic", pa.string()), ("partition", pa.int32()), ("base_offset", pa.int64()), ("last_offset", pa.int64()),
    ("records", pa.int32()), ("first_timestamp", pa.int64()), ("max_timestamp", pa.int64()),
    ("producer_id", pa.int64()), ("producer_epoch", pa.int32()), ("transactional", pa.bool_()),
    ("control", pa.bool_()), ("control_type", pa.int32()), ("coordinator_epoch", pa.int32())])


class BatchRows:
    """Rows of one segment's batches on their way to Arrow (not thread-safe: one per segment read)."""

    def __init__(self, topic: str, partition: int) -> None:
        self.topic, self.partition = topic, partition
        self._cols: dict[str, list] = {f.name: [] for f in ARROW_SCHEMA}

    def __len__(self) -> int:
        return len(self._cols["base_offset"])

    def add(self, h: BatchHeader, control_type: Optional[int] = None,
            coordinator_epoch: Optional[int] = None) -> None:
        """One batch: its header, and for a control batch what its record says."""
        first_ts = h.max_timestamp if h.attributes & ATTR_DELETE_HORIZON else h.base_timestamp
        control = bool(h.attributes & ATTR_CONTROL)
        for name, v in (("topic", self.topic), ("partition", self.partition), ("base_offset", h.base_offset),
                        ("last_offset", h.last_offset), ("records", h.record_count),
                        ("first_timestamp", first_ts), ("max_timestamp", h.max_timestamp),
                        ("producer_id", h.producer_id), ("producer_epoch", h.producer_epoch),
                        ("transactional", bool(h.attributes & ATTR_TRANSACTIONAL)), ("control", control),
                        ("control_type", control_type if control else None),
                        ("coordinator_epoch", coordinator_epoch if control else None)):
            self._cols[name].append(v)

    def flush(self) -> pa.RecordBatch:
        out = pa.RecordBatch.from_pydict(self._cols, schema=ARROW_SCHEMA)
        self._cols = {f.name: [] for f in ARROW_SCHEMA}
        return out
