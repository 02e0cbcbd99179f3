"""``__transaction_state`` records (kafkasim/protocol/txn_log.py): Kafka's bytes, by hand and by kio, and Kafka's TransactionLogTest."""

# no ``from __future__ import annotations``: kio reads the entities' field types at run time
import io
import re
import struct
from dataclasses import dataclass, field
from typing import ClassVar

import pytest
from hypothesis import given, strategies as st

import kafkasim.protocol.kio_import  # noqa: F401  (kio without its hypothesis hooks, as the product imports it)
from kafkasim.errors import CorruptRecordError, IllegalStateError
from kafkasim.protocol import txn_log as t
from kafkasim.protocol.offsets import java_string_hash

from kio.serial import entity_reader, entity_writer
from kio.static.constants import EntityType
from kio.static.primitive import i8, i16, i32, i64

V = t.TxnLogValue


# -- by hand -------------------------------------------------------------------------------------
def test_key_by_hand():
    """int16 version 0, then TransactionLogKey v0: TransactionalId as int16 length + UTF-8."""
    assert t.encode_txn_key("id") == b"\x00\x00" + b"\x00\x02" + b"id"
    assert t.encode_txn_key("") == b"\x00\x00\x00\x00"
    assert t.encode_txn_key("é") == b"\x00\x00\x00\x02\xc3\xa9"
    assert t.decode_txn_key(b"\x00\x00\x00\x02id") == t.TxnLogKey(0, "id")


ONGOING = V(producer_id=1334, producer_epoch=0, transaction_timeout_ms=1000, transaction_status=t.TXN_STATE_ONGOING,
            transaction_partitions=(("topic", (0,)),), transaction_last_update_timestamp_ms=0,
            transaction_start_timestamp_ms=0)


def test_value_v0_by_hand():
    """Version 0 (not flexible): int64 pid, int16 epoch, int32 timeout, int8 status,
    int32 array count, per entry (int16-length topic, int32 count, int32 ids), int64 last update, int64 start."""
    expected = (b"\x00\x00"                               # value version 0
                + b"\x00\x00\x00\x00\x00\x00\x05\x36"     # ProducerId 1334
                + b"\x00\x00"                             # ProducerEpoch 0
                + b"\x00\x00\x03\xe8"                     # TransactionTimeoutMs 1000
                + b"\x01"                                 # TransactionStatus Ongoing
                + b"\x00\x00\x00\x01"                     # TransactionPartitions: 1 entry
                + b"\x00\x05topic"                        #   Topic
                + b"\x00\x00\x00\x01" + b"\x00\x00\x00\x00"  # PartitionIds [0]
                + b"\x00" * 8                             # TransactionLastUpdateTimestampMs 0
                + b"\x00" * 8)                            # TransactionStartTimestampMs 0
    assert t.encode_txn_value(ONGOING, 0) == expected
    assert t.decode_txn_value(expected) == ONGOING


def test_value_v1_by_hand():
    """Version 1 (flexible): compact array (uvarint count+1), compact string (uvarint length+1),
    a tagged-field count after each partitions entry and after the value, tags in order, each
    uvarint tag, uvarint size, data; fields at their defaults are left out."""
    value = ONGOING._replace(previous_producer_id=7, client_transaction_version=2)
    expected = (b"\x00\x01"                               # value version 1
                + b"\x00\x00\x00\x00\x00\x00\x05\x36"     # ProducerId 1334
                + b"\x00\x00"                             # ProducerEpoch 0
                + b"\x00\x00\x03\xe8"                     # TransactionTimeoutMs 1000
                + b"\x01"                                 # TransactionStatus Ongoing
                + b"\x02"                                 # TransactionPartitions: 1 entry (+1)
                + b"\x06topic"                            #   Topic: 5 bytes (+1)
                + b"\x02" + b"\x00\x00\x00\x00"           #   PartitionIds: 1 id (+1), [0]
                + b"\x00"                                 #   no tagged fields in the entry
                + b"\x00" * 8 + b"\x00" * 8               # timestamps
                + b"\x02"                                 # 2 tagged fields (NextProducerId -1 is left out)
                + b"\x00\x08" + struct.pack(">q", 7)      #   tag 0 PreviousProducerId, 8 bytes
                + b"\x02\x02" + struct.pack(">h", 2))     #   tag 2 ClientTransactionVersion, 2 bytes
    assert t.encode_txn_value(value, 1) == expected
    assert t.decode_txn_value(expected) == value


def test_empty_state_writes_null_partitions():
    empty = ONGOING._replace(transaction_status=t.TXN_STATE_EMPTY, transaction_partitions=None)
    v0 = t.encode_txn_value(empty, 0)
    assert v0[17:21] == b"\xff\xff\xff\xff"               # null array: int32 -1
    v1 = t.encode_txn_value(empty, 1)
    assert v1[17:18] == b"\x00" and v1[-1:] == b"\x00"      # null compact array: 0; no tagged fields
    assert len(v1) == 2 + 15 + 1 + 16 + 1
    assert t.decode_txn_value(v0) == t.decode_txn_value(v1) == empty
    assert t.encode_txn_value(empty._replace(transaction_partitions=()), 1) == v1


def test_non_empty_state_without_partitions_writes_an_empty_array():
    done = ONGOING._replace(transaction_status=t.TXN_STATE_COMPLETE_COMMIT, transaction_partitions=None)
    assert t.encode_txn_value(done, 0)[17:21] == b"\x00\x00\x00\x00"
    assert t.decode_txn_value(t.encode_txn_value(done, 1)).transaction_partitions == ()


def test_tagged_fields_are_not_written_at_version_0():
    value = ONGOING._replace(previous_producer_id=5, next_producer_id=6, client_transaction_version=2)
    assert t.encode_txn_value(value, 0) == t.encode_txn_value(ONGOING, 0)
    assert t.decode_txn_value(t.encode_txn_value(value, 0)) == ONGOING


# -- kio as an independent encoder ----------------------------------------------------------------
# The two schemas written as kio writes its generated entities (kio has no TransactionLog*:
# it generates the client messages only), from TransactionLogKey.json / TransactionLogValue.json.
@dataclass(frozen=True, slots=True, kw_only=True)
class KioKey:
    __type__: ClassVar = EntityType.data
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = False
    transactional_id: str = field(metadata={"kafka_type": "string"})


def _value_classes(version: int, flexible: bool):
    @dataclass(frozen=True, slots=True, kw_only=True)
    class PartitionsSchema:
        __type__: ClassVar = EntityType.nested
        __version__: ClassVar[i16] = i16(version)
        __flexible__: ClassVar[bool] = flexible
        topic: str = field(metadata={"kafka_type": "string"})
        partition_ids: tuple[i32, ...] = field(metadata={"kafka_type": "int32"}, default=())

    if flexible:
        @dataclass(frozen=True, slots=True, kw_only=True)
        class Value:
            __type__: ClassVar = EntityType.data
            __version__: ClassVar[i16] = i16(version)
            __flexible__: ClassVar[bool] = True
            producer_id: i64 = field(metadata={"kafka_type": "int64"})
            previous_producer_id: i64 = field(metadata={"kafka_type": "int64", "tag": 0}, default=i64(-1))
            next_producer_id: i64 = field(metadata={"kafka_type": "int64", "tag": 1}, default=i64(-1))
            producer_epoch: i16 = field(metadata={"kafka_type": "int16"})
            transaction_timeout_ms: i32 = field(metadata={"kafka_type": "int32"})
            transaction_status: i8 = field(metadata={"kafka_type": "int8"})
            transaction_partitions: tuple[PartitionsSchema, ...] | None
            transaction_last_update_timestamp_ms: i64 = field(metadata={"kafka_type": "int64"})
            transaction_start_timestamp_ms: i64 = field(metadata={"kafka_type": "int64"})
            client_transaction_version: i16 = field(metadata={"kafka_type": "int16", "tag": 2}, default=i16(0))
    else:
        @dataclass(frozen=True, slots=True, kw_only=True)
        class Value:
            __type__: ClassVar = EntityType.data
            __version__: ClassVar[i16] = i16(version)
            __flexible__: ClassVar[bool] = False
            producer_id: i64 = field(metadata={"kafka_type": "int64"})
            producer_epoch: i16 = field(metadata={"kafka_type": "int16"})
            transaction_timeout_ms: i32 = field(metadata={"kafka_type": "int32"})
            transaction_status: i8 = field(metadata={"kafka_type": "int8"})
            transaction_partitions: tuple[PartitionsSchema, ...] | None
            transaction_last_update_timestamp_ms: i64 = field(metadata={"kafka_type": "int64"})
            transaction_start_timestamp_ms: i64 = field(metadata={"kafka_type": "int64"})
    return PartitionsSchema, Value


KIO = {0: _value_classes(0, False), 1: _value_classes(1, True)}


def _kio_value_bytes(v: t.TxnLogValue, version: int) -> bytes:
    parts_cls, value_cls = KIO[version]
    parts = None if v.transaction_partitions is None else tuple(
        parts_cls(topic=topic, partition_ids=tuple(i32(p) for p in ids)) for topic, ids in v.transaction_partitions)
    kw = dict(producer_id=i64(v.producer_id), producer_epoch=i16(v.producer_epoch),
              transaction_timeout_ms=i32(v.transaction_timeout_ms), transaction_status=i8(v.transaction_status),
              transaction_partitions=parts, transaction_last_update_timestamp_ms=i64(v.transaction_last_update_timestamp_ms),
              transaction_start_timestamp_ms=i64(v.transaction_start_timestamp_ms))
    if version >= 1:
        kw.update(previous_producer_id=i64(v.previous_producer_id), next_producer_id=i64(v.next_producer_id),
                  client_transaction_version=i16(v.client_transaction_version))
    buf = io.BytesIO()
    entity_writer(value_cls)(buf, value_cls(**kw))
    return struct.pack(">h", version) + buf.getvalue()


_i = lambda bits: st.integers(-(1 << (bits - 1)), (1 << (bits - 1)) - 1)  # noqa: E731
_partitions = st.lists(st.tuples(st.text(max_size=12), st.lists(_i(32), max_size=5).map(tuple)), max_size=4).map(tuple)
_values = st.builds(
    V, _i(64), _i(16), _i(32), st.integers(1, 7), _partitions, _i(64), _i(64), _i(64), _i(64), _i(16))


@given(_values, st.sampled_from([0, 1]))
def test_value_bytes_equal_kios_encoder(value, version):
    data = t.encode_txn_value(value, version)
    if version == 0:
        value = value._replace(previous_producer_id=-1, next_producer_id=-1, client_transaction_version=0)
    assert data == _kio_value_bytes(value, version)
    assert t.decode_txn_value(data) == value


@given(st.text(max_size=40))
def test_key_bytes_equal_kios_encoder(tid):
    buf = io.BytesIO()
    entity_writer(KioKey)(buf, KioKey(transactional_id=tid))
    assert t.encode_txn_key(tid) == b"\x00\x00" + buf.getvalue()
    assert t.decode_txn_record(t.encode_txn_key(tid), None) == (t.TxnLogKey(0, tid), None)


def test_kio_reads_what_we_write():
    value = ONGOING._replace(next_producer_id=99, transaction_partitions=(("a", (1, 2)), ("b", ())))
    data = t.encode_txn_value(value, 1)
    parts_cls, value_cls = KIO[1]
    read, n = entity_reader(value_cls)(memoryview(data), 2)
    assert n == len(data) - 2 and read.next_producer_id == 99   # n: bytes read after the version and read.previous_producer_id == -1
    assert [(p.topic, p.partition_ids) for p in read.transaction_partitions] == [("a", (1, 2)), ("b", ())]


# -- Kafka's TransactionLogTest --------------------------------------------------------------------
TOPIC_PARTITIONS = (("topic1", (0, 1)), ("topic2", (0, 1, 2)))


def test_should_throw_exception_write_invalid_txn():
    """shouldThrowExceptionWriteInvalidTxn: an Empty state with partitions cannot be written."""
    bad = V(23423, 0, 1000, t.TXN_STATE_EMPTY, TOPIC_PARTITIONS, 0, 0)
    for version in (0, 1):
        with pytest.raises(IllegalStateError, match="state is Empty"):
            t.encode_txn_value(bad, version)


def test_should_read_write_messages():
    """shouldReadWriteMessages: six ids in the six written states, through a record batch."""
    from kafkasim.records import record_batch as rb
    pids = {"zero": 0, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5}
    states = {0: t.TXN_STATE_EMPTY, 1: t.TXN_STATE_ONGOING, 2: t.TXN_STATE_PREPARE_COMMIT,
              3: t.TXN_STATE_COMPLETE_COMMIT, 4: t.TXN_STATE_PREPARE_ABORT, 5: t.TXN_STATE_COMPLETE_ABORT}
    records = []
    for i, (tid, pid) in enumerate(pids.items()):
        state = states[pid]
        value = V(pid, 0, 1000, state, None if state == t.TXN_STATE_EMPTY else TOPIC_PARTITIONS, 0, 0)
        records.append((i, 0, t.encode_txn_key(tid), t.encode_txn_value(value, 1), ()))
    batch = rb.encode_batch(0, records)
    seen = 0
    for rec in rb.iter_records(batch, 0, rb.decode_header(batch)):
        key, value = t.decode_txn_record(rec.key, rec.value)
        pid = pids[key.transactional_id]
        assert (value.producer_id, value.producer_epoch, value.transaction_timeout_ms) == (pid, 0, 1000)
        assert value.transaction_status == states[pid]
        assert value.transaction_partitions == (None if pid == 0 else TOPIC_PARTITIONS)
        seen += 1
    assert seen == len(pids)


def test_transaction_metadata_parsing_and_tombstone():
    """testTransactionMetadataParsing / testTransactionMetadataTombstoneParsing."""
    key, value = t.decode_txn_record(t.encode_txn_key("id"), t.encode_txn_value(ONGOING, 1))
    assert key.transactional_id == "id" and value.state_name == "Ongoing"
    assert value.transaction_partitions == (("topic", (0,)),)
    assert t.decode_txn_record(t.encode_txn_key("id"), None) == (t.TxnLogKey(0, "id"), None)


def test_serialize_to_highest_non_flexible_and_to_flexible_version():
    """testSerializeTransactionLogValueToHighestNonFlexibleVersion / ...ToFlexibleVersion."""
    v = V(1, 1, 1000, t.TXN_STATE_COMPLETE_COMMIT, (), 500, 500, previous_producer_id=1, next_producer_id=1)
    assert t.encode_txn_value(v, 0)[:2] == b"\x00\x00"
    assert t.encode_txn_value(v, 1)[:2] == b"\x00\x01"
    assert t.encode_txn_value(v)[:2] == b"\x00\x01"


def test_deserialize_highest_supported_value():
    """testDeserializeHighestSupportedTransactionLogValue."""
    v = V(100, 50, 500, t.TXN_STATE_COMPLETE_COMMIT, (("topic", (0,)),), 1000, 750)
    d = t.decode_txn_value(t.encode_txn_value(v, 1))
    assert (d.producer_id, d.producer_epoch, d.state_name, d.transaction_start_timestamp_ms,
            d.transaction_last_update_timestamp_ms, d.transaction_timeout_ms) == (100, 50, "CompleteCommit", 750, 1000, 500)
    assert d.transaction_partitions == (("topic", (0,)),)


def test_deserialize_future_value_skips_unknown_tagged_fields():
    """testDeserializeFutureTransactionLogValue: tags 100 (a string) and 101 (an int32) in the value
    and in a partitions entry are read and ignored."""
    def tags():
        foo = b"\x00\x03foo"                               # a non-flexible STRING, as in Kafka's test
        return b"\x02" + b"\x64" + bytes([len(foo)]) + foo + b"\x65\x04" + struct.pack(">i", 4000)
    data = (b"\x00\x01" + struct.pack(">qhib", 1000, 100, 1000, t.TXN_STATE_COMPLETE_COMMIT)
            + b"\x02" + b"\x06topic" + b"\x02" + struct.pack(">i", 1) + tags()
            + struct.pack(">qq", 2000, 3000) + tags())
    d = t.decode_txn_value(data)
    assert d == V(1000, 100, 1000, t.TXN_STATE_COMPLETE_COMMIT, (("topic", (1,)),), 2000, 3000)


def test_read_key_can_read_unknown_message():
    """testReadTxnRecordKeyCanReadUnknownMessage: an unknown key version is an unknown key, not an error."""
    key = t.decode_txn_key(struct.pack(">h", 0x7FFF))
    assert key == t.TxnLogKey(0x7FFF, None) and key.is_unknown
    assert t.decode_txn_record(struct.pack(">h", 0x7FFF) + b"whatever", b"not a value") == (key, None)


# -- malformed records ------------------------------------------------------------------------------
GOOD_V0 = t.encode_txn_value(ONGOING, 0)
GOOD_V1 = t.encode_txn_value(ONGOING._replace(previous_producer_id=3), 1)


@pytest.mark.parametrize("data, message", [
    (b"\x00", "2 bytes needed, 1 left"),
    (b"\x00\x02" + GOOD_V0[2:], "unknown TransactionLogValue version 2"),
    (b"\xff\xff" + GOOD_V0[2:], "unknown TransactionLogValue version -1"),
    (GOOD_V0[:16] + b"\x09" + GOOD_V0[17:], "unknown transaction state id 9"),
    (GOOD_V0[:-1], "16 bytes needed, 15 left"),
    (GOOD_V0 + b"\x00", "1 bytes left over"),
    (GOOD_V0[:17] + b"\xff\xff\xff\xfe" + GOOD_V0[21:], "invalid length -2 for the array TransactionPartitions"),
    (GOOD_V0[:17] + b"\x7f\xff\xff\xff" + GOOD_V0[21:], "cannot fit"),
    (GOOD_V0[:21] + b"\xff\xff" + GOOD_V0[23:], "negative length -1 for the non-nullable string Topic"),
    (GOOD_V0[:23] + b"\xff\xfe\xfd\xfc\xfb" + GOOD_V0[28:], "Topic is not UTF-8"),
    (GOOD_V0[:28] + b"\xff\xff\xff\xff" + GOOD_V0[32:], "invalid length -1 for the array PartitionIds"),
    (GOOD_V1[:18] + b"\x00" + GOOD_V1[19:], "null or negative length -1 for the non-nullable string Topic"),
    (GOOD_V1[:-10] + b"\x00\x07" + GOOD_V1[-8:-1], "tagged field 0 (an int64) has 7 bytes"),
    (GOOD_V1[:-11] + b"\x01\x02\x01\x00\x05", "tagged field 2 (an int16) has 1 bytes"),
    (GOOD_V1[:17] + b"\xff\xff\xff\xff\xff\x00", "unsigned varint longer than 5 bytes"),
])
def test_malformed_values(data, message):
    with pytest.raises(CorruptRecordError, match=re.escape(message)):
        t.decode_txn_value(data)


@pytest.mark.parametrize("data, message", [
    (None, "null key"),
    (b"", "2 bytes needed, 0 left"),
    (b"\x00\x00\x00", "2 bytes needed, 1 left"),
    (b"\x00\x00\x00\x05ab", "5 bytes needed, 2 left"),
    (b"\x00\x00\xff\xff", "negative length -1"),
    (b"\x00\x00\x00\x01a\x00", "1 bytes left over"),
])
def test_malformed_keys(data, message):
    with pytest.raises(CorruptRecordError, match=f"__transaction_state key: .*{message}"):
        t.decode_txn_key(data)


def test_every_truncation_of_a_value_is_refused():
    for good in (GOOD_V0, GOOD_V1):
        for n in range(len(good)):
            with pytest.raises(CorruptRecordError):
                t.decode_txn_value(good[:n])


def test_encode_refuses_what_does_not_fit():
    with pytest.raises(ValueError, match="unknown TransactionLogValue version 2"):
        t.encode_txn_value(ONGOING, 2)
    with pytest.raises(ValueError, match="does not fit"):
        t.encode_txn_value(ONGOING._replace(producer_epoch=1 << 15), 1)
    with pytest.raises(ValueError, match="longer than a Kafka string"):
        t.encode_txn_key("x" * 40000)


# -- topic constants and partitioning -----------------------------------------------------------------
def test_topic_constants_are_kafkas():
    assert t.TRANSACTION_STATE_TOPIC == "__transaction_state"
    assert t.TRANSACTION_STATE_TOPIC_PARTITIONS == 50
    assert (t.TRANSACTION_STATE_REPLICATION_FACTOR, t.TRANSACTION_STATE_MIN_ISR) == (3, 2)
    assert t.TRANSACTION_STATE_TOPIC_CONFIGS == {
        "cleanup.policy": "compact", "compression.type": "uncompressed",
        "unclean.leader.election.enable": False, "segment.bytes": 104857600}
    from kafkasim.config import LogConfig
    cfg = LogConfig.from_overrides(t.TRANSACTION_STATE_TOPIC_CONFIGS)
    assert cfg.compression_type == "uncompressed" and not cfg.unclean_leader_election_enable
    assert [t.TXN_STATE_NAMES[i] for i in range(8)] == [
        "Empty", "Ongoing", "PrepareCommit", "PrepareAbort", "CompleteCommit", "CompleteAbort", "Dead",
        "PrepareEpochFence"]


@given(st.text(max_size=30))
def test_partition_is_abs_java_hash_mod_50(tid):
    h = java_string_hash(tid)
    expected = (0 if h == -(1 << 31) else abs(h)) % 50
    assert t.partition_for_transactional_id(tid) == expected
    assert 0 <= t.partition_for_transactional_id(tid, 7) < 7


def test_partition_examples():
    # "hello".hashCode() == 99162322 → 22; the empty string hashes to 0
    assert t.partition_for_transactional_id("hello") == 99162322 % 50 == 22
    assert t.partition_for_transactional_id("") == 0
    assert t.partition_for_transactional_id("polygenelubricants") == 0   # hashCode Integer.MIN_VALUE


def test_docstring_examples_hold():
    import doctest
    import importlib
    result = doctest.testmod(importlib.import_module("kafkasim.protocol.txn_log"))
    assert result.failed == 0 and result.attempted > 0
