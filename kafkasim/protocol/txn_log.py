"""Record format of the internal transaction state topic ``__transaction_state`` (pure codec, txn facts §3.5).

This module is the only code that turns a transaction coordinator's state into the key/value
bytes stored in ``__transaction_state`` and back. Unlike offset commits and classic groups in
``__consumer_offsets`` (msgpack, :mod:`kafkasim.protocol.offsets`), these are Kafka's exact bytes — the generated
``TransactionLogKey``/``TransactionLogValue`` messages behind an int16 version — so
``kafka-dump-log --transaction-log-decoder`` and kafkasim read each other's records.

Key (``TransactionLogKey.json``, version 0, not flexible)::

    version int16 = 0 | transactional_id: int16 length + UTF-8

A key of any other version is not an error: Kafka reads it as an unknown key and skips the
record ("a left over from an aborted upgrade"); :func:`decode_txn_key` returns it with
``transactional_id`` None.

Value (``TransactionLogValue.json``): ``version int16`` (0 or 1), then::

    producer_id int64 | producer_epoch int16 | transaction_timeout_ms int32 | transaction_status int8
    | transaction_partitions: nullable array of {topic: string, partition_ids: array of int32}
    | transaction_last_update_timestamp_ms int64 | transaction_start_timestamp_ms int64

- Version 0 is not flexible: strings are int16 length + bytes, arrays int32 count (-1 null).
- Version 1 is flexible: strings and arrays are "compact" (unsigned varint length + 1, 0 for
  null), and each struct — the value and each partitions entry — ends with tagged fields
  (unsigned varint count, then per field: uvarint tag, uvarint size, data). The value's
  tagged fields are ``previous_producer_id`` (tag 0, int64, default -1), ``next_producer_id``
  (tag 1, int64, default -1) and ``client_transaction_version`` (tag 2, int16, default 0); a
  field at its default is not written, and unknown tags are skipped on read (KIP-915).
- ``transaction_partitions`` is null when the state is Empty; Kafka refuses to write an Empty
  state that has partitions (``IllegalStateError`` here).
- At version 0 the tagged fields are not written (Kafka 4's ``TransactionLog`` sets them only
  for version 1), so they read back as their defaults.

A null value is a tombstone: the transactional id expired.

Worked example: ``encode_txn_key("id")`` is ``00 00 | 00 02 | 69 64``.

No generated classes: kio (the wire codec, :mod:`kafkasim.protocol.kio_import`) has no
``TransactionLogKey``/``TransactionLogValue`` — it generates only the client-facing message
schemas — so the two schemas are written by hand here, and the tests check them against kio's
own serializer given the same schemas as kio-style entities.

Decoding trusts nothing: a short buffer, a negative length, bad UTF-8, an unknown value
version or state id, a known tag of the wrong size, or bytes left over are a
:class:`~kafkasim.errors.CorruptRecordError` naming the problem.

Pure functions; thread-safe.
"""

from __future__ import annotations

import struct
from typing import NamedTuple, Optional, Sequence

from kafkasim.errors import CorruptRecordError, IllegalStateError
from kafkasim.protocol.offsets import partition_for_group
from kafkasim.protocol.schema_bytes import RecordReader, uvarint

__all__ = [
    "TRANSACTION_STATE_TOPIC", "TRANSACTION_STATE_TOPIC_PARTITIONS", "TRANSACTION_STATE_TOPIC_CONFIGS",
    "TRANSACTION_STATE_REPLICATION_FACTOR", "TRANSACTION_STATE_MIN_ISR", "TRANSACTION_STATE_SEGMENT_BYTES",
    "TXN_LOG_KEY_VERSION", "TXN_LOG_VALUE_VERSIONS",
    "TXN_STATE_EMPTY", "TXN_STATE_ONGOING", "TXN_STATE_PREPARE_COMMIT", "TXN_STATE_PREPARE_ABORT",
    "TXN_STATE_COMPLETE_COMMIT", "TXN_STATE_COMPLETE_ABORT", "TXN_STATE_DEAD", "TXN_STATE_PREPARE_EPOCH_FENCE",
    "TXN_STATE_NAMES", "TxnLogKey", "TxnLogValue", "TxnLogRecord",
    "partition_for_transactional_id", "encode_txn_key", "encode_txn_value",
    "decode_txn_key", "decode_txn_value", "decode_txn_record",
]

TRANSACTION_STATE_TOPIC = "__transaction_state"
TRANSACTION_STATE_TOPIC_PARTITIONS = 50           # transaction.state.log.num.partitions
TRANSACTION_STATE_REPLICATION_FACTOR = 3          # transaction.state.log.replication.factor
TRANSACTION_STATE_MIN_ISR = 2                     # transaction.state.log.min.isr
TRANSACTION_STATE_SEGMENT_BYTES = 104857600       # transaction.state.log.segment.bytes
TRANSACTION_STATE_TOPIC_CONFIGS = {
    "cleanup.policy": "compact",
    "compression.type": "uncompressed",
    "unclean.leader.election.enable": False,
    "segment.bytes": TRANSACTION_STATE_SEGMENT_BYTES,
}
"""The configs Kafka enforces on the topic (``TransactionStateManager.transactionTopicConfigs``),
except ``min.insync.replicas``: Kafka sets it to :data:`TRANSACTION_STATE_MIN_ISR`, which the
creator caps at the replication factor it can have (one broker: 1). Writes use acks=-1."""

TXN_LOG_KEY_VERSION = 0
TXN_LOG_VALUE_VERSIONS = (0, 1)

# Kafka's TransactionState ids (the int8 on disk)
TXN_STATE_EMPTY = 0
TXN_STATE_ONGOING = 1
TXN_STATE_PREPARE_COMMIT = 2
TXN_STATE_PREPARE_ABORT = 3
TXN_STATE_COMPLETE_COMMIT = 4
TXN_STATE_COMPLETE_ABORT = 5
TXN_STATE_DEAD = 6                 # in memory only, never written
TXN_STATE_PREPARE_EPOCH_FENCE = 7  # a pending state only, never written
TXN_STATE_NAMES = {
    0: "Empty", 1: "Ongoing", 2: "PrepareCommit", 3: "PrepareAbort", 4: "CompleteCommit",
    5: "CompleteAbort", 6: "Dead", 7: "PrepareEpochFence",
}
"""Kafka's state names, as DescribeTransactions and ListTransactions spell them."""

_NO_PRODUCER_ID = -1
_TAG_PREVIOUS_PRODUCER_ID = 0
_TAG_NEXT_PRODUCER_ID = 1
_TAG_CLIENT_TRANSACTION_VERSION = 2
_HEAD = struct.Struct(">qhib")     # producer_id, producer_epoch, timeout, status
_TIMES = struct.Struct(">qq")      # last update, start
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")


class TxnLogKey(NamedTuple):
    """A record key: its ``version`` and the ``transactional_id`` (None for a key version
    Kafka does not know, whose record readers skip)."""

    version: int
    transactional_id: Optional[str]

    @property
    def is_unknown(self) -> bool:
        return self.transactional_id is None


class TxnLogValue(NamedTuple):
    """A record value: one transactional id's state (Kafka's ``TransactionLogValue``).

    ``transaction_partitions`` is ``((topic, (partition, ...)), ...)``, or None (null: the
    state is Empty). Decoding gives tuples; encoding takes any sequences.
    """

    producer_id: int
    producer_epoch: int
    transaction_timeout_ms: int
    transaction_status: int
    transaction_partitions: Optional[Sequence[tuple[str, Sequence[int]]]]
    transaction_last_update_timestamp_ms: int
    transaction_start_timestamp_ms: int
    previous_producer_id: int = _NO_PRODUCER_ID       # tagged, version 1+
    next_producer_id: int = _NO_PRODUCER_ID           # tagged, version 1+
    client_transaction_version: int = 0               # tagged, version 1+

    @property
    def state_name(self) -> str:
        return TXN_STATE_NAMES.get(self.transaction_status, f"Unknown({self.transaction_status})")


class TxnLogRecord(NamedTuple):
    """One decoded record: the key, and the value or None (a tombstone, or an unknown key's record)."""

    key: TxnLogKey
    value: Optional[TxnLogValue]


def partition_for_transactional_id(transactional_id: str,
                                   num_partitions: int = TRANSACTION_STATE_TOPIC_PARTITIONS) -> int:
    """The ``__transaction_state`` partition that holds ``transactional_id``: Kafka's
    ``Utils.abs(transactionalId.hashCode) % n``, the group rule of :mod:`~kafkasim.protocol.offsets`.

    >>> partition_for_transactional_id("polygenelubricants")   # hashCode == Integer.MIN_VALUE → abs 0
    0
    """
    return partition_for_group(transactional_id, num_partitions)


# -- encoding ------------------------------------------------------------------------------------
def _string(s: str, flexible: bool, what: str) -> bytes:
    if not isinstance(s, str):
        raise TypeError(f"{what} must be a str, got {type(s).__name__}")
    data = s.encode("utf-8")
    if len(data) > 0x7FFF:
        raise ValueError(f"{what} is {len(data)} bytes of UTF-8, longer than a Kafka string (32767)")
    return (uvarint(len(data) + 1) if flexible else _I16.pack(len(data))) + data


def encode_txn_key(transactional_id: str) -> bytes:
    """The key of ``transactional_id``'s record: int16 version 0, then the id as an int16-length string.

    >>> encode_txn_key("id").hex()
    '000000026964'
    """
    return _I16.pack(TXN_LOG_KEY_VERSION) + _string(transactional_id, False, "transactional id")


def encode_txn_value(value: TxnLogValue, version: int = 1) -> bytes:
    """The value bytes of ``value`` at ``version`` (0 while ``transaction.version`` is 0, else 1).

    ``IllegalStateError`` for an Empty state with partitions (Kafka: "Transaction is not
    expected to have any partitions since its state is Empty"); ``ValueError``/``TypeError``
    for a field that does not fit its type.
    """
    if version not in TXN_LOG_VALUE_VERSIONS:
        raise ValueError(f"unknown TransactionLogValue version {version!r} (Kafka has 0 and 1)")
    flexible = version >= 1
    if value.transaction_status == TXN_STATE_EMPTY:
        if value.transaction_partitions:
            raise IllegalStateError(
                "Transaction is not expected to have any partitions since its state is Empty: "
                f"{value.transaction_partitions!r}")
        partitions = None
    else:
        partitions = value.transaction_partitions or ()
    try:
        out = [_I16.pack(version),
               _HEAD.pack(value.producer_id, value.producer_epoch, value.transaction_timeout_ms,
                          value.transaction_status)]
        if partitions is None:
            out.append(b"\x00" if flexible else _I32.pack(-1))
        else:
            out.append(uvarint(len(partitions) + 1) if flexible else _I32.pack(len(partitions)))
            for topic, ids in partitions:
                out.append(_string(topic, flexible, "topic"))
                out.append(uvarint(len(ids) + 1) if flexible else _I32.pack(len(ids)))
                out.append(struct.pack(f">{len(ids)}i", *ids))
                if flexible:
                    out.append(b"\x00")                        # the partitions entry's tagged fields
        out.append(_TIMES.pack(value.transaction_last_update_timestamp_ms, value.transaction_start_timestamp_ms))
        if flexible:
            tagged = []
            if value.previous_producer_id != _NO_PRODUCER_ID:
                tagged.append((_TAG_PREVIOUS_PRODUCER_ID, _I64.pack(value.previous_producer_id)))
            if value.next_producer_id != _NO_PRODUCER_ID:
                tagged.append((_TAG_NEXT_PRODUCER_ID, _I64.pack(value.next_producer_id)))
            if value.client_transaction_version != 0:
                tagged.append((_TAG_CLIENT_TRANSACTION_VERSION, _I16.pack(value.client_transaction_version)))
            out.append(uvarint(len(tagged)))
            for tag, data in tagged:
                out.append(uvarint(tag) + uvarint(len(data)) + data)
    except struct.error as exc:
        raise ValueError(f"a field of {value!r} does not fit its Kafka type: {exc}") from None
    return b"".join(out)


# -- decoding ------------------------------------------------------------------------------------
class _Reader(RecordReader):
    """A bounds-checked cursor; every failure is a CorruptRecordError naming ``what`` and the byte."""

    __slots__ = ()

    def __init__(self, buf, what: str) -> None:
        super().__init__(buf, f"{TRANSACTION_STATE_TOPIC} {what}")

    def string(self, flexible: bool, field: str) -> str:
        if flexible:
            n = self.uvarint() - 1
        else:
            (n,) = self.unpack(_I16)
        if n < 0:
            raise self.fail(f"null or negative length {n} for the non-nullable string {field}")
        return self.utf8(self.take(n), field)

    def array_length(self, flexible: bool, field: str, nullable: bool) -> int:
        n = self.uvarint() - 1 if flexible else self.unpack(_I32)[0]
        if n < -1 or (n == -1 and not nullable):
            raise self.fail(f"invalid length {n} for the array {field}")
        if n > len(self.buf) - self.pos:      # every element takes at least one byte
            raise self.fail(f"array {field} of {n} elements cannot fit in {len(self.buf) - self.pos} bytes")
        return n


def decode_txn_key(data: bytes) -> TxnLogKey:
    """A record key: ``TxnLogKey(0, transactional_id)``, or ``TxnLogKey(version, None)`` for a
    key version Kafka does not know (skip that record, as Kafka's loader does)."""
    if data is None:
        raise CorruptRecordError(f"{TRANSACTION_STATE_TOPIC} key: a record has a null key")
    r = _Reader(data, "key")
    (version,) = r.unpack(_I16)
    if version != TXN_LOG_KEY_VERSION:
        return TxnLogKey(version, None)
    tid = r.string(False, "TransactionalId")
    r.done()
    return TxnLogKey(version, tid)


def decode_txn_value(data: Optional[bytes]) -> Optional[TxnLogValue]:
    """A record value, or None for a tombstone (the transactional id expired)."""
    if data is None:
        return None
    r = _Reader(data, "value")
    (version,) = r.unpack(_I16)
    if version not in TXN_LOG_VALUE_VERSIONS:
        raise r.fail(f"unknown TransactionLogValue version {version}")
    flexible = version >= 1
    pid, epoch, timeout, status = r.unpack(_HEAD)
    if status not in TXN_STATE_NAMES:
        raise r.fail(f"unknown transaction state id {status}")
    n = r.array_length(flexible, "TransactionPartitions", nullable=True)
    partitions = None
    if n >= 0:
        partitions = []
        for _ in range(n):
            topic = r.string(flexible, "Topic")
            m = r.array_length(flexible, "PartitionIds", nullable=False)
            ids = struct.unpack(f">{m}i", r.take(4 * m))
            if flexible:
                r.tagged_fields()                 # none known in a partitions entry: skipped
            partitions.append((topic, ids))
        partitions = tuple(partitions)
    last_update, start = r.unpack(_TIMES)
    prev_pid, next_pid, client_tv = _NO_PRODUCER_ID, _NO_PRODUCER_ID, 0
    if flexible:
        for tag, raw in r.tagged_fields().items():
            if tag in (_TAG_PREVIOUS_PRODUCER_ID, _TAG_NEXT_PRODUCER_ID):
                if len(raw) != 8:
                    raise r.fail(f"tagged field {tag} (an int64) has {len(raw)} bytes")
                if tag == _TAG_PREVIOUS_PRODUCER_ID:
                    (prev_pid,) = _I64.unpack(raw)
                else:
                    (next_pid,) = _I64.unpack(raw)
            elif tag == _TAG_CLIENT_TRANSACTION_VERSION:
                if len(raw) != 2:
                    raise r.fail(f"tagged field {tag} (an int16) has {len(raw)} bytes")
                (client_tv,) = _I16.unpack(raw)
    r.done()
    return TxnLogValue(pid, epoch, timeout, status, partitions, last_update, start, prev_pid, next_pid, client_tv)


def decode_txn_record(key: bytes, value: Optional[bytes]) -> TxnLogRecord:
    """Decode one record of ``__transaction_state``: ``(TxnLogKey, TxnLogValue | None)``.

    The value is None for a tombstone, and also for a record whose key version is unknown
    (``key.is_unknown``: its value is not read; skip the record).
    """
    k = decode_txn_key(key)
    if k.is_unknown:
        return TxnLogRecord(k, None)
    return TxnLogRecord(k, decode_txn_value(value))
