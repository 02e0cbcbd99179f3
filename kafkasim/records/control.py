"""Control batches: Kafka's transaction markers (COMMIT/ABORT) in record batch v2 (txn facts §3.2).

A transaction ends with one *control batch* per partition it wrote to, written by the
partition leader on the coordinator's behalf (Kafka's ``MemoryRecords.writeEndTransactionalMarker``).
Its shape is fixed::

    batch header   magic 2, no compression, CreateTime, attributes 0x30 (transactional | control),
                   producer id and epoch of the transaction, base sequence -1,
                   exactly one record, offset delta 0, no headers
    record key     version int16 = 0 | type int16          (4 bytes; ABORT 0, COMMIT 1)
    record value   version int16 = 0 | coordinator_epoch int32   (6 bytes: Kafka's EndTxnMarker)

Kafka's other control record types (the KRaft ones, 2..6) are named here so a reader can
say what it met; kafkasim writes only ABORT and COMMIT.

Reading follows Kafka's checks (``ControlRecordType.parseTypeId``,
``EndTransactionMarker.deserializeValue``): a key needs at least 4 bytes and a version ≥ 0
(a higher version is read as version 0); an end-transaction value needs at least 6 bytes
and a version ≥ 0. Anything else is a :class:`~kafkasim.errors.CorruptRecordError`
naming the problem. A type id Kafka does not know reads as :data:`CONTROL_UNKNOWN` (-1),
which readers ignore, as Kafka's do.

Example::

    >>> from kafkasim.records.framing import decode_header
    >>> b = encode_control_batch(7, 0, commit=True, coordinator_epoch=3, timestamp_ms=1000)
    >>> h = decode_header(b)
    >>> hex(h.attributes), h.base_sequence, h.record_count
    ('0x30', -1, 1)
    >>> read_control_batch(b, 0, h)
    (ControlRecord(version=0, type=1), EndTxnMarker(version=0, coordinator_epoch=3))

Pure functions over bytes; thread-safe.
"""

from __future__ import annotations

import struct
from typing import NamedTuple, Optional

from kafkasim.errors import CorruptRecordError, InvalidArgumentError, InvalidRecordError
from kafkasim.records.framing import (
    ATTR_CONTROL, ATTR_TRANSACTIONAL, NO_PARTITION_LEADER_EPOCH, NO_SEQUENCE, BatchHeader,
)
from kafkasim.records.record_batch import decode_columns, encode_batch

__all__ = [
    "CONTROL_ABORT", "CONTROL_COMMIT", "CONTROL_LEADER_CHANGE", "CONTROL_SNAPSHOT_HEADER",
    "CONTROL_SNAPSHOT_FOOTER", "CONTROL_KRAFT_VERSION", "CONTROL_KRAFT_VOTERS", "CONTROL_UNKNOWN",
    "CONTROL_TYPE_NAMES", "CONTROL_KEY_VERSION", "CONTROL_KEY_SIZE", "END_TXN_MARKER_VERSION",
    "END_TXN_MARKER_SIZE", "CONTROL_BATCH_ATTRIBUTES",
    "ControlRecord", "EndTxnMarker", "encode_control_key", "encode_end_txn_marker",
    "encode_control_batch", "decode_control_key", "decode_end_txn_marker", "is_control_batch",
    "read_control_batch",
]

# Kafka's ControlRecordType ids
CONTROL_ABORT = 0
CONTROL_COMMIT = 1
CONTROL_LEADER_CHANGE = 2      # KRaft
CONTROL_SNAPSHOT_HEADER = 3    # KRaft
CONTROL_SNAPSHOT_FOOTER = 4    # KRaft
CONTROL_KRAFT_VERSION = 5      # KRaft membership
CONTROL_KRAFT_VOTERS = 6       # KRaft membership
CONTROL_UNKNOWN = -1
"""What a type id Kafka does not define reads as (readers ignore such a control record)."""

CONTROL_TYPE_NAMES = {
    CONTROL_ABORT: "ABORT", CONTROL_COMMIT: "COMMIT", CONTROL_LEADER_CHANGE: "LEADER_CHANGE",
    CONTROL_SNAPSHOT_HEADER: "SNAPSHOT_HEADER", CONTROL_SNAPSHOT_FOOTER: "SNAPSHOT_FOOTER",
    CONTROL_KRAFT_VERSION: "KRAFT_VERSION", CONTROL_KRAFT_VOTERS: "KRAFT_VOTERS", CONTROL_UNKNOWN: "UNKNOWN",
}
"""Kafka's names of the control record types (``kafka-dump-log`` prints them)."""

CONTROL_KEY_VERSION = 0
CONTROL_KEY_SIZE = 4
END_TXN_MARKER_VERSION = 0
END_TXN_MARKER_SIZE = 6
CONTROL_BATCH_ATTRIBUTES = ATTR_TRANSACTIONAL | ATTR_CONTROL
"""0x30: the attributes of a transaction marker batch (no compression, CreateTime)."""

_KEY = struct.Struct(">hh")
_END_TXN = struct.Struct(">hi")


class ControlRecord(NamedTuple):
    """The key of a control record: its key ``version`` and its ``type`` (one of the ``CONTROL_*`` ids)."""

    version: int
    type: int

    @property
    def is_commit(self) -> bool:
        return self.type == CONTROL_COMMIT

    @property
    def is_abort(self) -> bool:
        return self.type == CONTROL_ABORT

    @property
    def type_name(self) -> str:
        return CONTROL_TYPE_NAMES[self.type]


class EndTxnMarker(NamedTuple):
    """The value of a COMMIT/ABORT control record (Kafka's ``EndTxnMarker``)."""

    version: int
    coordinator_epoch: int


def encode_control_key(control_type: int) -> bytes:
    """The 4-byte key of a control record of ``control_type`` (key version 0)."""
    if control_type not in CONTROL_TYPE_NAMES or control_type == CONTROL_UNKNOWN:
        raise InvalidArgumentError(f"unknown control record type {control_type!r} (Kafka defines 0..6)")
    return _KEY.pack(CONTROL_KEY_VERSION, control_type)


def encode_end_txn_marker(coordinator_epoch: int) -> bytes:
    """The 6-byte value of a COMMIT/ABORT record: version 0, ``coordinator_epoch`` (int32)."""
    try:
        return _END_TXN.pack(END_TXN_MARKER_VERSION, coordinator_epoch)
    except struct.error as exc:
        raise InvalidRecordError(f"coordinator epoch {coordinator_epoch!r} is not an int32: {exc}") from None


def encode_control_batch(
    producer_id: int,
    producer_epoch: int,
    commit: bool,
    coordinator_epoch: int,
    timestamp_ms: int,
    partition_leader_epoch: int = NO_PARTITION_LEADER_EPOCH,
    base_offset: int = 0,
) -> bytes:
    """One transaction marker batch, the bytes Kafka's ``writeEndTransactionalMarker`` writes.

    ``commit`` picks COMMIT (True) or ABORT (False). The producer id and epoch are the
    transaction's (under KIP-890 v2 the bumped epoch); ``timestamp_ms`` is the record's
    timestamp and the batch's base and max timestamps. ``InvalidRecordError`` for a
    producer id < 0 (Kafka: "Cannot write transactional messages without a valid producer
    ID") or a field outside its int16/int32/int64; ``InvalidTimestampError`` for a bad
    timestamp.
    """
    if type(producer_id) is not int or producer_id < 0:
        raise InvalidRecordError(f"a transaction marker needs a producer id >= 0, got {producer_id!r}")
    if type(producer_epoch) is not int or producer_epoch < 0:
        raise InvalidRecordError(f"a transaction marker needs a producer epoch >= 0, got {producer_epoch!r}")
    key = encode_control_key(CONTROL_COMMIT if commit else CONTROL_ABORT)
    value = encode_end_txn_marker(coordinator_epoch)
    return encode_batch(base_offset, [(0, timestamp_ms, key, value, ())],
                        producer_id=producer_id, producer_epoch=producer_epoch, base_sequence=NO_SEQUENCE,
                        partition_leader_epoch=partition_leader_epoch, attributes=CONTROL_BATCH_ATTRIBUTES)


def decode_control_key(key: Optional[bytes], *, where: str = "<buffer>") -> ControlRecord:
    """Parse a control record key as Kafka does: at least 4 bytes, version ≥ 0 (a higher
    version is read as version 0), an unknown type id → :data:`CONTROL_UNKNOWN`."""
    if key is None:
        raise CorruptRecordError(f"{where}: control record has a null key (a control key needs {CONTROL_KEY_SIZE} bytes)")
    if len(key) < CONTROL_KEY_SIZE:
        raise CorruptRecordError(
            f"{where}: invalid control record key: must have at least {CONTROL_KEY_SIZE} bytes, "
            f"found only {len(key)}")
    version, type_id = _KEY.unpack_from(key, 0)
    if version < 0:
        raise CorruptRecordError(f"{where}: invalid control record key version {version} (data corruption?)")
    return ControlRecord(version, type_id if type_id in CONTROL_TYPE_NAMES else CONTROL_UNKNOWN)


def decode_end_txn_marker(value: Optional[bytes], *, where: str = "<buffer>") -> EndTxnMarker:
    """Parse the value of a COMMIT/ABORT record as Kafka does: at least 6 bytes, version ≥ 0
    (a higher version is read as version 0)."""
    if value is None:
        raise CorruptRecordError(
            f"{where}: end transaction marker has a null value (it needs {END_TXN_MARKER_SIZE} bytes)")
    if len(value) < END_TXN_MARKER_SIZE:
        raise CorruptRecordError(
            f"{where}: invalid end transaction marker value: must have at least {END_TXN_MARKER_SIZE} bytes, "
            f"found only {len(value)}")
    version, coordinator_epoch = _END_TXN.unpack_from(value, 0)
    if version < 0:
        raise CorruptRecordError(f"{where}: invalid end transaction marker version {version} (data corruption?)")
    return EndTxnMarker(version, coordinator_epoch)


def is_control_batch(header: BatchHeader) -> bool:
    """True when the batch's control attribute (0x20) is set."""
    return bool(header.attributes & ATTR_CONTROL)


def read_control_batch(buf, pos: int, header: BatchHeader, *,
                       where: str = "<buffer>") -> Optional[tuple[ControlRecord, Optional[EndTxnMarker]]]:
    """``(ControlRecord, EndTxnMarker | None)`` of the verified control batch at ``pos``.

    The marker is None for a control record that is not COMMIT or ABORT. As Kafka
    (``ProducerAppendInfo.append``, the consumers' ``CompletedFetch``), only the first record
    counts. A control batch with no record at all — the cleaner emptied it — returns None
    (Kafka: "the entire transaction has been cleaned from the log"). ``InvalidArgumentError``
    when the batch is not a control batch; ``CorruptRecordError`` for a malformed key or value.
    """
    if not header.attributes & ATTR_CONTROL:
        raise InvalidArgumentError(
            f"{where}: batch at position {pos} (base offset {header.base_offset}) is not a control batch "
            f"(attributes 0x{header.attributes:x})")
    if header.record_count == 0:
        return None
    _, _, keys, values, _ = decode_columns(buf, pos, header, where=where)
    if not keys:
        return None
    at = f"{where}: control batch at position {pos} (base offset {header.base_offset})"
    record = decode_control_key(keys[0], where=at)
    if record.type not in (CONTROL_ABORT, CONTROL_COMMIT):
        return record, None
    return record, decode_end_txn_marker(values[0], where=at)
