"""Transaction marker batches (kafkasim.records.control): Kafka's bytes, what other readers make of them, Kafka's checks."""

from __future__ import annotations

import struct

import crc32c
import pytest
from hypothesis import given, strategies as st

from kafkasim.errors import CorruptRecordError, InvalidArgumentError, InvalidRecordError, InvalidTimestampError
from kafkasim.records import control as c
from kafkasim.records import record_batch as rb

kafka_default = pytest.importorskip("kafka.record.default_records")
aiokafka_default = pytest.importorskip("aiokafka.record.default_records")
aiokafka_control = pytest.importorskip("aiokafka.record.control_record")


def test_control_type_ids_are_kafkas():
    assert (c.CONTROL_ABORT, c.CONTROL_COMMIT, c.CONTROL_LEADER_CHANGE, c.CONTROL_SNAPSHOT_HEADER,
            c.CONTROL_SNAPSHOT_FOOTER, c.CONTROL_KRAFT_VERSION, c.CONTROL_KRAFT_VOTERS,
            c.CONTROL_UNKNOWN) == (0, 1, 2, 3, 4, 5, 6, -1)
    assert c.CONTROL_BATCH_ATTRIBUTES == 0x30


def test_commit_marker_by_hand():
    """The whole 78-byte batch, field by field (Kafka's RECORD_BATCH_OVERHEAD 61 +
    CURRENT_END_TXN_SCHEMA_RECORD_SIZE 17, the buffer writeEndTransactionalMarker fills)."""
    b = c.encode_control_batch(7, 2, commit=True, coordinator_epoch=3, timestamp_ms=1000,
                               partition_leader_epoch=5, base_offset=42)
    assert len(b) == 78
    section = bytes.fromhex(
        "20"          # record length 16 (zigzag varint)
        "00"          # record attributes
        "00"          # timestamp delta 0
        "00"          # offset delta 0
        "08" "0000" "0001"           # key: length 4, version 0, type 1 (COMMIT)
        "0c" "0000" "00000003"       # value: length 6, version 0, coordinator epoch 3
        "00")         # no headers
    tail = struct.pack(">hiqqqhii", 0x30, 0, 1000, 1000, 7, 2, -1, 1)   # attributes .. record count
    crc = crc32c.crc32c(tail + section)
    head = struct.pack(">qiibI", 42, 78 - 12, 5, 2, crc)
    assert b == head + tail + section


def test_abort_marker_key_is_type_0():
    b = c.encode_control_batch(7, 0, commit=False, coordinator_epoch=0, timestamp_ms=0)
    h = rb.decode_header(b)
    assert h.producer_id == 7 and h.partition_leader_epoch == -1 and h.base_offset == 0
    assert c.read_control_batch(b, 0, h) == (c.ControlRecord(0, c.CONTROL_ABORT), c.EndTxnMarker(0, 0))


def _kafka_python_marker(pid: int, epoch: int, key: bytes, value: bytes, ts: int) -> bytes:
    """kafka-python's builder cannot set the control bit (only a broker writes control batches):
    build the transactional batch with it, then set bit 0x20 and recompute the CRC."""
    builder = kafka_default.DefaultRecordBatchBuilder(
        magic=2, compression_type=0, is_transactional=1, producer_id=pid, producer_epoch=epoch,
        base_sequence=-1, batch_size=1 << 20)
    builder.append(0, timestamp=ts, key=key, value=value, headers=[])
    buf = bytearray(builder.build())
    struct.pack_into(">h", buf, 21, struct.unpack_from(">h", buf, 21)[0] | 0x20)
    struct.pack_into(">I", buf, 17, crc32c.crc32c(bytes(buf[21:])))
    return bytes(buf)


@given(pid=st.integers(0, 2 ** 63 - 1), epoch=st.integers(0, 2 ** 15 - 1), commit=st.booleans(),
       coord=st.integers(-2 ** 31, 2 ** 31 - 1), ts=st.integers(0, 2 ** 62))
def test_bytes_equal_kafka_pythons_builder(pid, epoch, commit, coord, ts):
    ours = c.encode_control_batch(pid, epoch, commit, coord, ts, partition_leader_epoch=0)
    key = struct.pack(">hh", 0, 1 if commit else 0)
    value = struct.pack(">hi", 0, coord)
    assert ours == _kafka_python_marker(pid, epoch, key, value, ts)


@pytest.mark.parametrize("commit", [True, False])
def test_kafka_python_reads_a_control_batch(commit):
    b = c.encode_control_batch(1234, 5, commit, coordinator_epoch=9, timestamp_ms=1700000000000)
    batch = kafka_default.DefaultRecordBatch(b)
    assert batch.is_control_batch and batch.is_transactional
    assert batch.validate_crc()
    assert (batch.producer_id, batch.producer_epoch, batch.base_sequence) == (1234, 5, -1)
    records = list(batch)
    assert len(records) == 1
    rec = records[0]
    assert isinstance(rec, kafka_default.ControlRecord)
    assert (rec.version, rec.type, rec.commit, rec.abort) == (0, int(commit), commit, not commit)
    assert rec.offset == 0 and rec.timestamp == 1700000000000 and rec.value == struct.pack(">hi", 0, 9)


@pytest.mark.parametrize("commit", [True, False])
def test_aiokafka_reads_a_control_batch(commit):
    b = c.encode_control_batch(1234, 5, commit, coordinator_epoch=9, timestamp_ms=1700000000000, base_offset=100)
    batch = aiokafka_default.DefaultRecordBatch(b)
    assert batch.is_control_batch and batch.is_transactional
    assert batch.validate_crc()
    assert (batch.producer_id, batch.base_offset, batch.next_offset) == (1234, 100, 101)
    (rec,) = list(batch)
    marker = aiokafka_control.ControlRecord.parse(rec.key)
    assert marker == (aiokafka_control.COMMIT_MARKER if commit else aiokafka_control.ABORT_MARKER)


@given(pid=st.integers(0, 2 ** 63 - 1), epoch=st.integers(0, 2 ** 15 - 1), commit=st.booleans(),
       coord=st.integers(-2 ** 31, 2 ** 31 - 1), ts=st.integers(0, 2 ** 62),
       ple=st.integers(-1, 2 ** 31 - 1), base=st.integers(0, 2 ** 62))
def test_round_trip(pid, epoch, commit, coord, ts, ple, base):
    b = c.encode_control_batch(pid, epoch, commit, coord, ts, partition_leader_epoch=ple, base_offset=base)
    h = rb.decode_header(b)
    rb.verify(b, 0, h)
    assert c.is_control_batch(h)
    assert (h.base_offset, h.partition_leader_epoch, h.producer_id, h.producer_epoch) == (base, ple, pid, epoch)
    assert (h.base_timestamp, h.max_timestamp, h.base_sequence, h.last_offset_delta) == (ts, ts, -1, 0)
    record, marker = c.read_control_batch(b, 0, h)
    assert record.is_commit == commit and record.is_abort != commit
    assert marker == c.EndTxnMarker(0, coord)
    # and through the ordinary record reader: one record at the base offset, no sequence
    (rec,) = list(rb.iter_records(b, 0, h))
    assert rec.offset == base and rec.key == c.encode_control_key(int(commit))


def test_read_control_batch_in_a_buffer_at_a_position():
    data = rb.encode_batch(0, [(0, 5, b"k", b"v", ())]) + c.encode_control_batch(3, 1, True, 4, 6, base_offset=1)
    pos, h = list(rb.iter_batches(data))[1]
    assert c.read_control_batch(data, pos, h) == (c.ControlRecord(0, 1), c.EndTxnMarker(0, 4))


def test_read_control_batch_refuses_a_data_batch():
    b = rb.encode_batch(0, [(0, 5, b"k", b"v", ())])
    with pytest.raises(InvalidArgumentError, match="not a control batch"):
        c.read_control_batch(b, 0, rb.decode_header(b))


def _control(key, value, attributes=0x30, records=None) -> bytes:
    recs = records if records is not None else [(0, 1, key, value, ())]
    return rb.encode_batch(0, recs, producer_id=1, producer_epoch=0, attributes=attributes)


def test_other_control_types_have_no_end_txn_marker():
    b = _control(struct.pack(">hh", 0, c.CONTROL_LEADER_CHANGE), b"\x00\x00\x00\x00\x00")
    assert c.read_control_batch(b, 0, rb.decode_header(b)) == (c.ControlRecord(0, 2), None)
    b = _control(struct.pack(">hh", 0, 77), None)
    rec, marker = c.read_control_batch(b, 0, rb.decode_header(b))
    assert rec == c.ControlRecord(0, c.CONTROL_UNKNOWN) and rec.type_name == "UNKNOWN" and marker is None


def test_empty_control_batch_reads_as_none():
    """Kafka's testAppendEmptyControlBatch: a control batch the cleaner emptied is no marker."""
    empty = rb._assemble(0, -1, 0x30, 0, 0, 0, 1, 0, -1, 0, b"")   # header fields, 0 records, no section
    h = rb.decode_header(empty)
    rb.verify(empty, 0, h)
    assert c.read_control_batch(empty, 0, h) is None


def test_only_the_first_record_counts():
    b = _control(None, None, records=[(0, 1, struct.pack(">hh", 0, 0), struct.pack(">hi", 0, 1), ()),
                                      (1, 1, struct.pack(">hh", 0, 1), struct.pack(">hi", 0, 2), ())])
    assert c.read_control_batch(b, 0, rb.decode_header(b)) == (c.ControlRecord(0, 0), c.EndTxnMarker(0, 1))


@pytest.mark.parametrize("key, message", [
    (None, "null key"),
    (b"", "at least 4 bytes, found only 0"),
    (b"\x00\x00\x01", "at least 4 bytes, found only 3"),
    (struct.pack(">hh", -1, 1), "key version -1"),
])
def test_malformed_keys(key, message):
    with pytest.raises(CorruptRecordError, match=message):
        c.decode_control_key(key)
    b = _control(key, struct.pack(">hi", 0, 1))
    with pytest.raises(CorruptRecordError, match=message):
        c.read_control_batch(b, 0, rb.decode_header(b), where="seg.log")


def test_keys_as_kafka_reads_them():
    """A longer key and a higher key version are read as version 0 would be (Kafka logs and goes on)."""
    assert c.decode_control_key(struct.pack(">hh", 0, 1) + b"extra") == (0, 1)
    assert c.decode_control_key(struct.pack(">hh", 3, 0)) == (3, 0)
    assert c.decode_control_key(memoryview(struct.pack(">hh", 0, 6))) == (0, 6)


@pytest.mark.parametrize("value, message", [
    (None, "null value"),
    (b"\x00\x00\x00\x00\x01", "at least 6 bytes, found only 5"),
    (struct.pack(">hi", -2, 1), "marker version -2"),
])
def test_malformed_end_txn_values(value, message):
    with pytest.raises(CorruptRecordError, match=message):
        c.decode_end_txn_marker(value)
    b = _control(struct.pack(">hh", 0, 1), value)
    with pytest.raises(CorruptRecordError, match=message):
        c.read_control_batch(b, 0, rb.decode_header(b))


def test_end_txn_values_as_kafka_reads_them():
    assert c.decode_end_txn_marker(struct.pack(">hi", 1, -7) + b"more") == c.EndTxnMarker(1, -7)


@pytest.mark.parametrize("kwargs, error", [
    (dict(producer_id=-1), InvalidRecordError),
    (dict(producer_epoch=-1), InvalidRecordError),
    (dict(producer_epoch=1 << 15), InvalidRecordError),
    (dict(coordinator_epoch=1 << 31), InvalidRecordError),
    (dict(timestamp_ms=-5), InvalidTimestampError),
])
def test_encode_refuses_impossible_markers(kwargs, error):
    args = dict(producer_id=1, producer_epoch=0, commit=True, coordinator_epoch=0, timestamp_ms=0) | kwargs
    with pytest.raises(error):
        c.encode_control_batch(**args)


def test_encode_control_key_refuses_unknown_types():
    assert c.encode_control_key(c.CONTROL_KRAFT_VOTERS) == b"\x00\x00\x00\x06"
    with pytest.raises(InvalidArgumentError):
        c.encode_control_key(-1)
    with pytest.raises(InvalidArgumentError):
        c.encode_control_key(7)


def test_encode_batch_writes_transactional_and_control_bits():
    """encode_batch accepts every attribute bit Kafka defines, and nothing else."""
    b = rb.encode_batch(0, [(0, 1, b"k", b"v", ())], producer_id=1, producer_epoch=0, base_sequence=0,
                        attributes=rb.ATTR_TRANSACTIONAL)
    assert rb.decode_header(b).attributes == 0x10
    assert kafka_default.DefaultRecordBatch(b).is_transactional
    with pytest.raises(InvalidRecordError, match="unsupported batch attributes"):
        rb.encode_batch(0, [(0, 1, b"k", b"v", ())], attributes=0x80)


def test_docstring_examples_hold():
    import doctest
    import importlib
    result = doctest.testmod(importlib.import_module("kafkasim.records.control"))
    assert result.failed == 0 and result.attempted > 0
